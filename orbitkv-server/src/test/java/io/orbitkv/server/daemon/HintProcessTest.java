package io.orbitkv.server.daemon;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.PageToPublish;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.StateKeys;
import io.orbitkv.state.TokenChain;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.Hashes;
import io.orbitkv.state.protocol.HintKind;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.PageLocation;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import io.orbitkv.testkit.ManagerProcess;
import io.orbitkv.testkit.ProcessTest;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * HINT through the public protocol, with the Java client against a real Manager process (16 MiB
 * of DRAM in 64 KiB slots, LRU, 256 KiB pinnable per namespace): pinned pages answer a QUERY from
 * DRAM at once after another namespace published more than the whole tier, a PIN past the budget
 * is refused page by page, hints naming another namespace's keys get the reply of absent keys, and
 * DROP makes a later QUERY miss; CONTAINS, through the same client, reports where each page is.
 */
@ProcessTest
class HintProcessTest {

    private static final int PAGE_TOKENS = 16;
    private static final int IMAGE_BYTES = 60_000;

    @TempDir
    static Path dir;
    private static ManagerProcess manager;

    @BeforeAll
    static void start() throws Exception {
        manager = Managers.start(dir, "--set", "hintPinnedBytesPerNamespace=256k");
    }

    @AfterAll
    static void stop() throws Exception {
        assertThat(manager.terminate()).as("exit status after SIGTERM").isZero();
    }

    private static Namespace namespace(String model) {
        return new Namespace(model, "r1", "sha256:w", "sha256:t", "", "bf16", "nhd", PAGE_TOKENS, 1, 0, 1, 0, 1);
    }

    private static OrbitKvClient client(Namespace ns) throws Exception {
        OrbitKvClient c = OrbitKvClient.connect(ManagerProcess.socket(dir), Duration.ofSeconds(20));
        c.register(ns.modelId(), 1, ns, new RecoveryContract(PAGE_TOKENS, List.of(new StateGroup.Full(0))));
        return c;
    }

    /** The block hashes of a prompt of {@code pages} full pages (plus one token), distinct per {@code seed}. */
    private static List<byte[]> hashes(Namespace ns, int pages, int seed) {
        int[] tokens = new int[pages * PAGE_TOKENS + 1];
        for (int i = 0; i < tokens.length; i++) tokens[i] = seed * 100_000 + i;
        return List.of(TokenChain.pageHashes(ns.digest(), tokens, PAGE_TOKENS, new byte[0]));
    }

    private static void publish(OrbitKvClient c, List<byte[]> hashes) {
        for (int first = 0; first < hashes.size(); first += 16) {
            List<PageToPublish> pages = new ArrayList<>();
            for (int i = first; i < Math.min(first + 16, hashes.size()); i++) {
                pages.add(PageToPublish.ofBlockHash(0, hashes.get(i), MemorySegment.ofArray(new byte[IMAGE_BYTES])));
            }
            // NO_SPACE is possible while earlier pages still wait for their SSD writes: the caller floods again
            assertThat(c.publish(pages)).hasSize(pages.size());
        }
    }

    private static List<Request.QueryGroup> blocks(List<byte[]> hashes) {
        return List.of(new Request.QueryGroup(0, KeyForm.BLOCK_HASH, Hashes.of(hashes)));
    }

    private static List<Request.QueryGroup> stateKeys(Namespace ns, List<byte[]> hashes) {
        List<StateKey> keys = new ArrayList<>();
        for (byte[] h : hashes) keys.add(StateKeys.forBlockHash(ns.digest(), 0, h));
        return List.of(new Request.QueryGroup(0, KeyForm.STATE_KEY, Hashes.ofKeys(keys)));
    }

    private static Reply.QueryResult query(OrbitKvClient c, long op, List<byte[]> hashes) {
        return c.query(new Request.Query(op, 0, CompletionTarget.HOST_READY, (long) hashes.size() * PAGE_TOKENS + 1, 0,
                blocks(hashes)));
    }

    @Test
    void pinnedPagesAreServedFromDramAfterAFloodAndForeignHintsChangeNothing() throws Exception {
        Namespace a = namespace("hint-a");
        Namespace b = namespace("hint-b");
        List<byte[]> prefix = hashes(a, 6, 1);
        try (OrbitKvClient ca = client(a); OrbitKvClient cb = client(b)) {
            publish(ca, prefix);
            Reply.Hinted pinned = ca.hint(HintKind.PIN, 120_000, blocks(prefix));
            assertThat(pinned).as("four 64 KiB slots fit the 256 KiB budget")
                    .isEqualTo(new Reply.Hinted(HintKind.PIN, 4, 0, 2));
            assertThat(ca.stats()).containsEntry("hint_pins", 4L).containsEntry("hint_pinned_bytes", 4L * 65536);

            int[] seed = {100};
            long[] op = {100};
            // 20 MiB of 64 KiB slots through a 16 MiB tier, again until the two unpinned pages left DRAM
            await().atMost(Duration.ofSeconds(60)).until(() -> {
                publish(cb, hashes(b, 320, seed[0]++));
                Reply.QueryResult all = query(ca, op[0], prefix);
                boolean fromDram = all.status() == QueryStatus.FINAL && all.boundaryTokens() == 6L * PAGE_TOKENS;
                ca.release(ca.awaitSettled(all).operationId());
                op[0]++;
                return !fromDram;
            });
            Reply.QueryResult hit = query(ca, 1, prefix.subList(0, 4));
            assertThat(hit.status()).as("answered from DRAM: nothing to stage").isEqualTo(QueryStatus.FINAL);
            assertThat(hit.boundaryTokens()).isEqualTo(4L * PAGE_TOKENS);
            ca.release(1);
            assertThat(ca.contains(blocks(prefix.subList(0, 4))).locations()).as("CONTAINS: the pinned pages are in DRAM")
                    .containsOnly(PageLocation.DRAM);
            assertThat(cb.contains(stateKeys(a, prefix))).as("a's keys asked by b: as keys nobody holds")
                    .isEqualTo(new Reply.Contained(false, java.util.Collections.nCopies(6, PageLocation.ABSENT)));

            for (HintKind kind : HintKind.values()) {
                int millis = kind == HintKind.PIN ? 60_000 : 0;
                Reply.Hinted foreign = cb.hint(kind, millis, stateKeys(a, prefix));
                Reply.Hinted absent = cb.hint(kind, millis, stateKeys(a, hashes(a, 6, 3)));
                assertThat(foreign).as(kind + " naming a's keys").isEqualTo(absent)
                        .isEqualTo(new Reply.Hinted(kind, 0, 6, 0));
            }
            Reply.QueryResult still = query(ca, 3, prefix.subList(0, 4));
            assertThat(still.status()).isEqualTo(QueryStatus.FINAL);
            assertThat(still.boundaryTokens()).as("b's hints left a's pages").isEqualTo(4L * PAGE_TOKENS);
            ca.release(3);

            assertThat(ca.hint(HintKind.DROP, 0, blocks(prefix)).applied()).isEqualTo(6);
            assertThat(ca.stats()).containsEntry("hint_pins", 0L);
            Reply.QueryResult miss = ca.awaitSettled(query(ca, 4, prefix));
            assertThat(miss.hit()).as("dropped from DRAM and SSD").isFalse();
            assertThat(ca.contains(blocks(prefix)).locations()).containsOnly(PageLocation.ABSENT);
            ca.release(4);
        }
        assertThat(manager.metric("orbitkv_manager_hint_pages_total{kind=\"pin\",outcome=\"refused_budget\"}"))
                .isEqualTo(2);
    }
}
