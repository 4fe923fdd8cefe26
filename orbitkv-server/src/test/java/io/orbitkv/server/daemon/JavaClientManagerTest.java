package io.orbitkv.server.daemon;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.OrbitKvException;
import io.orbitkv.client.PageToPublish;
import io.orbitkv.client.PublishOutcome;
import io.orbitkv.client.Region;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.TokenChain;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.Hashes;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.PageState;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import io.orbitkv.testkit.ManagerProcess;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import io.orbitkv.testkit.ProcessTest;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Java client ({@code orbitkv-client}) against a real Manager process ({@link ManagerProcess}): publish a prefix and
 * read it back through a HOST_READY lease; ENGINE_RESTORE it into a region; release and cancel
 * free what an operation held; a restarted engine (higher epoch) hits what the previous one
 * published and fences it. (The README's Java quick start runs in {@code ReadmeQuickStartTest}.)
 */
@ProcessTest
class JavaClientManagerTest {

    private static final int PAGE_TOKENS = 16;

    @TempDir
    static Path dir;
    private static ManagerProcess manager;

    @BeforeAll
    static void start() throws Exception {
        manager = Managers.start(dir);
    }

    @AfterAll
    static void stop() throws Exception {
        assertThat(manager.terminate()).as("exit status after SIGTERM").isZero();
    }

    /** A prefix of {@code pages} full pages (plus one token) and a distinct image per page. */
    private record Prefix(int[] tokens, List<byte[]> hashes, List<MemorySegment> images) {
        static Prefix of(Namespace ns, int pages, int seed) {
            int[] tokens = new int[pages * PAGE_TOKENS + 1];
            for (int i = 0; i < tokens.length; i++) tokens[i] = seed * 10_000 + i;
            List<byte[]> hashes = List.of(TokenChain.pageHashes(ns.digest(), tokens, PAGE_TOKENS, new byte[0]));
            List<MemorySegment> images = new ArrayList<>();
            for (int p = 0; p < pages; p++) {
                byte[] b = new byte[3000 + p * 500];
                for (int j = 0; j < b.length; j++) b[j] = (byte) (seed + p * 13 + j);
                images.add(MemorySegment.ofArray(b));
            }
            return new Prefix(tokens, hashes, images);
        }

        List<PageToPublish> pages() {
            List<PageToPublish> out = new ArrayList<>();
            for (int i = 0; i < hashes.size(); i++) out.add(PageToPublish.ofBlockHash(0, hashes.get(i), images.get(i)));
            return out;
        }

        Request.Query query(long op, CompletionTarget target) {
            return new Request.Query(op, 0, target, tokens.length, 0,
                    List.of(new Request.QueryGroup(0, KeyForm.BLOCK_HASH, Hashes.of(hashes))));
        }
    }

    private static Namespace namespace(String model) {
        return new Namespace(model, "r1", "sha256:w", "sha256:t", "", "bf16", "nhd", PAGE_TOKENS, 1, 0, 1, 0, 1);
    }

    private static OrbitKvClient client(Namespace ns, String instance, long epoch) throws Exception {
        OrbitKvClient c = OrbitKvClient.connect(ManagerProcess.socket(dir), Duration.ofSeconds(20));
        c.register(instance, epoch, ns, new RecoveryContract(PAGE_TOKENS, List.of(new StateGroup.Full(0))));
        return c;
    }

    private static List<Reply.PageResult> pages(Reply.QueryResult r) {
        return r.groups().getFirst().spans().stream().flatMap(s -> s.pages().stream()).toList();
    }

    @Test
    void publishedPrefixIsReadBackThroughHostReadyLeases() throws Exception {
        Namespace ns = namespace("java-host-ready");
        Prefix prefix = Prefix.of(ns, 3, 1);
        try (OrbitKvClient client = client(ns, ns.modelId(), 1)) {
            assertThat(client.publish(prefix.pages())).containsOnly(PublishOutcome.SEALED).hasSize(3);

            Reply.QueryResult hit = client.awaitSettled(client.query(prefix.query(1, CompletionTarget.HOST_READY)));

            assertThat(hit.hit()).isTrue();
            assertThat(hit.boundaryTokens()).isEqualTo(3L * PAGE_TOKENS);
            List<Reply.PageResult> pages = pages(hit);
            assertThat(pages).hasSize(3);
            for (int i = 0; i < 3; i++) {
                MemorySegment page = client.readLease(((Reply.Resident) pages.get(i)).lease());
                assertThat(page.mismatch(prefix.images().get(i))).as("page %d", i).isEqualTo(-1);
            }
            assertThat(client.stats()).containsEntry("leases", 3L);
            assertThat(client.release(1).pagesReleased()).isEqualTo(3);
            assertThat(client.stats()).containsEntry("leases", 0L);
        }
    }

    @Test
    void engineRestoreCopiesTheLeasedPagesIntoTheRegion() throws Exception {
        Namespace ns = namespace("java-engine-restore");
        Prefix prefix = Prefix.of(ns, 4, 2);
        try (OrbitKvClient client = client(ns, ns.modelId(), 1)) {
            client.publish(prefix.pages());
            Reply.QueryResult hit = client.awaitSettled(client.query(prefix.query(2, CompletionTarget.ENGINE_RESTORE)));
            Region region = client.registerRegion(dir.resolve("java-region"), 8192, 8);

            Reply.Completion done = client.restore(2, region, OrbitKvClient.residentPages(hit, 4));

            assertThat(done.outcome()).isEqualTo(Reply.Settled.OK);
            for (int i = 0; i < 4; i++) {
                MemorySegment image = prefix.images().get(i);
                assertThat(region.page(4 + i).asSlice(0, image.byteSize()).mismatch(image)).as("page %d", i).isEqualTo(-1);
            }
            assertThat(pages(client.poll(2, 0))).extracting(Reply.PageResult::state).containsOnly(PageState.READY);
            client.release(2);
        }
    }

    /** A QUERY of the first {@code pages} pages of {@code prefix} (plus one token), at {@code revision}. */
    private static Request.Query restoreQuery(Prefix prefix, long op, int revision, int pages) {
        return new Request.Query(op, revision, CompletionTarget.ENGINE_RESTORE, (long) pages * PAGE_TOKENS + 1, 0,
                List.of(new Request.QueryGroup(0, KeyForm.BLOCK_HASH, Hashes.of(prefix.hashes().subList(0, pages)))));
    }

    private static List<Request.RestorePage> firstPages(int pages) {
        List<Request.RestorePage> out = new ArrayList<>();
        for (int i = 0; i < pages; i++) out.add(new Request.RestorePage(0, i, i));
        return out;
    }

    @Test
    void queryAndRestorePipelinesAHitAndFallsBackToWhatAShorterOneHolds() throws Exception {
        Namespace ns = namespace("java-query-and-restore");
        Prefix prefix = Prefix.of(ns, 6, 5);
        try (OrbitKvClient client = client(ns, ns.modelId(), 1)) {
            assertThat(client.publish(prefix.pages().subList(0, 4))).containsOnly(PublishOutcome.SEALED);
            Region region = client.registerRegion(dir.resolve("java-pipelined-region"), 8192, 8);

            // Every named page is resident: the pipelined RESTORE is accepted behind the QUERY.
            region.mapping().fill((byte) 0);
            OrbitKvClient.Restored full = client.queryAndRestore(restoreQuery(prefix, 7, 0, 4), region, firstPages(4));
            assertThat(full.restoredOk()).isTrue();
            assertThat(full.result().boundaryTokens()).isEqualTo(4L * PAGE_TOKENS);
            assertRestored(prefix, region, 4);
            assertThat(pages(client.poll(7, 0))).extracting(Reply.PageResult::state).containsOnly(PageState.READY);

            // A new revision of the live operation: not pipelined, same outcome.
            region.mapping().fill((byte) 0);
            OrbitKvClient.Restored again = client.queryAndRestore(restoreQuery(prefix, 7, 1, 4), region, firstPages(4));
            assertThat(again.restoredOk()).isTrue();
            assertThat(again.result().revision()).isEqualTo(1);
            assertRestored(prefix, region, 4);
            assertThat(client.releaseAsync(7).get(20, java.util.concurrent.TimeUnit.SECONDS).pagesReleased()).isEqualTo(4);

            // The prompt names 6 pages, the Manager holds 4: the speculative RESTORE of 6 is refused
            // and copies nothing; the 4 held pages are restored by a second RESTORE.
            region.mapping().fill((byte) 0);
            OrbitKvClient.Restored shorter = client.queryAndRestore(restoreQuery(prefix, 8, 0, 6), region, firstPages(6));
            assertThat(shorter.restoredOk()).isTrue();
            assertThat(shorter.result().boundaryTokens()).isEqualTo(4L * PAGE_TOKENS);
            assertRestored(prefix, region, 4);
            assertThat(region.page(4).asSlice(0, 8).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE))
                    .as("nothing past the held pages was written").containsOnly(0);
            client.release(8);

            // Nothing resident: no restore at all.
            Prefix absent = Prefix.of(ns, 2, 6);
            OrbitKvClient.Restored miss = client.queryAndRestore(restoreQuery(absent, 9, 0, 2), region, firstPages(2));
            assertThat(miss.result().hit()).isFalse();
            assertThat(miss.completion()).isEmpty();
            client.release(9);
            assertThat(client.stats()).containsEntry("leases", 0L);
        }
    }

    private static void assertRestored(Prefix prefix, Region region, int pages) {
        for (int i = 0; i < pages; i++) {
            MemorySegment image = prefix.images().get(i);
            assertThat(region.page(i).asSlice(0, image.byteSize()).mismatch(image)).as("page %d", i).isEqualTo(-1);
        }
    }

    @Test
    void cancelEndsAnOperationAndItsIdCanBeReused() throws Exception {
        Namespace ns = namespace("java-cancel");
        Prefix prefix = Prefix.of(ns, 2, 3);
        try (OrbitKvClient client = client(ns, ns.modelId(), 1)) {
            assertThat(client.awaitSettled(client.query(prefix.query(3, CompletionTarget.HOST_READY))).hit()).isFalse();
            client.publish(prefix.pages());
            Request.Query second = new Request.Query(3, 1, CompletionTarget.HOST_READY, prefix.tokens().length, 0,
                    prefix.query(3, CompletionTarget.HOST_READY).groups());
            assertThat(client.awaitSettled(client.query(second)).hit()).as("a new revision replaces the miss").isTrue();

            assertThat(client.cancel(3).operationId()).isEqualTo(3);

            assertThatThrownBy(() -> client.poll(3, 1)).isInstanceOfSatisfying(OrbitKvException.class,
                    e -> assertThat(e.code()).isEqualTo(ErrorCode.NOT_FOUND));
            assertThat(client.stats()).containsEntry("leases", 0L);
            assertThat(client.awaitSettled(client.query(prefix.query(3, CompletionTarget.HOST_READY))).hit()).isTrue();
            client.release(3);
        }
    }

    @Test
    void aRestartedEngineHitsWhatItsPreviousIncarnationPublishedAndFencesIt() throws Exception {
        Namespace ns = namespace("java-restart");
        Prefix prefix = Prefix.of(ns, 2, 4);
        try (OrbitKvClient first = client(ns, "engine-r", 1)) {
            first.publish(prefix.pages());
            try (OrbitKvClient second = client(ns, "engine-r", 2)) {
                assertThatThrownBy(first::stats).satisfiesAnyOf(
                        e -> assertThat(e).isInstanceOfSatisfying(OrbitKvException.class,
                                k -> assertThat(k.code()).isEqualTo(ErrorCode.STALE_EPOCH)),
                        e -> assertThat(e).isInstanceOf(UncheckedIOException.class));
                Reply.QueryResult hit = second.awaitSettled(second.query(prefix.query(1, CompletionTarget.HOST_READY)));
                assertThat(hit.hit()).isTrue();
                MemorySegment page = second.readLease(((Reply.Resident) pages(hit).getFirst()).lease());
                assertThat(page.mismatch(prefix.images().getFirst())).isEqualTo(-1);
                second.release(1);
            }
        }
    }

    @Test
    void aClientThatClosesAndReRegistersAtOnceWithTheSameEpochIsNeverStale() throws Exception {
        Namespace ns = namespace("java-reconnect");
        for (int i = 0; i < 50; i++) {
            // client() throws OrbitKvException STALE_EPOCH if the Manager has not yet seen the
            // previous connection's EOF and refuses the same epoch (protocol §9.2).
            try (OrbitKvClient c = client(ns, "engine-reconnect", 1)) {
                assertThat(c.registration().epoch()).as("iteration %d", i).isEqualTo(1);
                // Requests still in flight keep the old connection's reader busy past the close.
                for (int r = 0; r < 32; r++) c.send(new Request.Stats(), Reply.StatsReply.class);
            }
        }
    }

    @Test
    void theSameEpochWhileThePreviousConnectionIsStillOpenIsStale() throws Exception {
        Namespace ns = namespace("java-same-epoch");
        try (OrbitKvClient first = client(ns, "engine-twice", 1)) {
            assertThatThrownBy(() -> client(ns, "engine-twice", 1)).isInstanceOfSatisfying(OrbitKvException.class,
                    e -> assertThat(e.code()).isEqualTo(ErrorCode.STALE_EPOCH));
            assertThat(first.stats()).as("the open incarnation keeps its session").containsKey("leases");
        }
    }
}
