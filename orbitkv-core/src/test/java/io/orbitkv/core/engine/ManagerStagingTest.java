package io.orbitkv.core.engine;

import io.orbitkv.state.Namespace;
import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.PageState;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import java.util.concurrent.CompletableFuture;

import static org.assertj.core.api.Assertions.assertThat;

/** Queries over pages that are only on SSD: PENDING, staging, failures, sharing, cancel, restart. */
class ManagerStagingTest {

    static final Namespace NS = ManagerFixture.namespace("model-a");

    @TempDir
    Path dir;
    ManagerFixture m;

    @AfterEach
    void close() {
        if (m != null) m.close();
    }

    /** {@link ManagerFixture#onSsdOnly} (write-through), and nothing held afterwards. */
    void onSsdOnly(Client c, long prompt, long... pages) {
        m.onSsdOnly(c, NS, prompt, pages);
        m.assertNothingHeld();
    }

    /** Occupies the dispatcher's only read slot until the returned future completes. */
    CompletableFuture<Void> holdReads() {
        return m.holdSsdIo();
    }

    double ssdReads() {
        return m.registry.get("orbitkv.ssd.reads").counter().count();
    }

    @Test
    void ssdOnlyPagesArePendingThenSettledThenFinalWithTheirBytes() throws IOException {
        m = ManagerFixture.open(dir);
        try (Client c = m.register("e1", 1, NS, ManagerFixture.FULL)) {
            onSsdOnly(c, 4, 0, 1, 2);
            CompletableFuture<Void> hold = holdReads();
            Reply.QueryResult pending = c.queryFull(1, 4, 3);
            assertThat(pending.status()).isEqualTo(QueryStatus.PENDING);
            assertThat(pending.boundaryTokens()).isEqualTo(48);
            assertThat(ManagerCoreTest.states(pending, 0)).containsOnly(PageState.RESERVED);
            assertThat(m.core.status().stagingBytes()).as("bytes admitted before any read").isEqualTo(3L * ManagerFixture.PAGE_BYTES); // 20 KiB is whole 4 KiB blocks
            hold.complete(null);
            assertThat(c.sink.await(1, CompletionEvent.QUERY_SETTLED).outcome()).isEqualTo(Reply.Settled.OK);
            Reply.QueryResult fin = (Reply.QueryResult) c.send(new Request.QueryPoll(1, 0));
            assertThat(fin.status()).isEqualTo(QueryStatus.FINAL);
            assertThat(fin.boundaryTokens()).isEqualTo(48);
            assertThat(ManagerCoreTest.states(fin, 0)).containsOnly(PageState.RESIDENT);
            c.assertBytes(fin, 4);
            assertThat(m.core.status().stagingBytes()).isZero();
            c.send(new Request.Release(1));
        }
        m.assertNothingHeld();
        assertThat(m.registry.get("orbitkv.manager.queries").tag("outcome", "pending").counter().count()).isEqualTo(1);
    }

    @Test
    void twoQueriesNeedingTheSameKeysShareOneSsdReadPerKey() throws IOException {
        m = ManagerFixture.open(dir);
        try (Client a = m.register("a", 1, NS, ManagerFixture.FULL); Client b = m.register("b", 1, NS, ManagerFixture.FULL)) {
            onSsdOnly(a, 4, 0, 1);
            double readsBefore = ssdReads();
            CompletableFuture<Void> hold = holdReads();
            assertThat(a.queryFull(1, 4, 2).status()).isEqualTo(QueryStatus.PENDING);
            assertThat(b.queryFull(1, 4, 2).status()).isEqualTo(QueryStatus.PENDING);
            hold.complete(null);
            a.sink.await(1, CompletionEvent.QUERY_SETTLED);
            b.sink.await(1, CompletionEvent.QUERY_SETTLED);
            Reply.QueryResult ra = (Reply.QueryResult) a.send(new Request.QueryPoll(1, 0));
            Reply.QueryResult rb = (Reply.QueryResult) b.send(new Request.QueryPoll(1, 0));
            assertThat(ra.boundaryTokens()).isEqualTo(32);
            assertThat(rb.boundaryTokens()).isEqualTo(32);
            a.assertBytes(ra, 4);
            b.assertBytes(rb, 4);
            assertThat(ssdReads() - readsBefore).as("one backing read per key").isEqualTo(2);
            assertThat(m.registry.get("orbitkv.tiered.stage").tag("result", "shared_read").counter().count()).isEqualTo(2);
            a.send(new Request.Release(1));
            b.send(new Request.Release(1));
        }
        m.assertNothingHeld();
    }

    @Test
    void aCorruptExtentShortensTheBoundaryAndNeverServesWrongBytes() throws IOException {
        m = ManagerFixture.open(dir);
        try (Client c = m.register("e1", 1, NS, ManagerFixture.FULL)) {
            onSsdOnly(c, 4, 0, 1, 2, 3);
            assertThat(corrupt(4, 0, 2)).isTrue();
            Reply.QueryResult first = c.queryFull(1, 4, 4);
            Reply.QueryResult fin = first.status() == QueryStatus.FINAL ? first : settled(c, 1, 0);
            assertThat(fin.hit()).isTrue();
            assertThat(fin.boundaryTokens()).as("page 2 is corrupt: pages 0..1 only").isEqualTo(32);
            assertThat(ManagerCoreTest.spans(fin, 0)).containsExactly(new long[] {0, 2});
            c.assertBytes(fin, 4);
            assertThat(m.core.status().leases()).as("page 3's staged lease was released").isEqualTo(2);
            c.send(new Request.Release(1));

            assertThat(corrupt(4, 0, 0)).isTrue();
            m.store.dram().evict(Client.key(NS, 4, 0, 0));
            m.store.dram().evict(Client.key(NS, 4, 0, 1));
            Reply.QueryResult again = c.queryFull(2, 4, 4);
            Reply.QueryResult fin2 = again.status() == QueryStatus.FINAL ? again : settled(c, 2, 0);
            assertThat(fin2.hit()).as("page 0 is corrupt: nothing to restore").isFalse();
            assertThat(ManagerCoreTest.states(fin2, 0)).doesNotContain(PageState.RESIDENT);
            c.send(new Request.Release(2));
        }
        m.assertNothingHeld();
    }

    Reply.QueryResult settled(Client c, long op, int revision) {
        c.sink.await(op, CompletionEvent.QUERY_SETTLED);
        return (Reply.QueryResult) c.send(new Request.QueryPoll(op, revision));
    }

    /** Flips a byte in the middle of a page's payload on disk. */
    boolean corrupt(long prompt, int group, long page) throws IOException {
        byte[] image = Client.image(prompt, group, page, ManagerFixture.PAGE_BYTES);
        try (var files = Files.list(dir.resolve("ssd"))) {
            for (Path file : files.toList()) {
                byte[] all = Files.readAllBytes(file);
                for (int off = 0; off + 64 <= all.length; off += 4096) {
                    if (Arrays.equals(all, off, off + 64, image, 0, 64)) {
                        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.WRITE)) {
                            int at = off + ManagerFixture.PAGE_BYTES / 2;
                            ch.write(ByteBuffer.wrap(new byte[] {(byte) ~all[at]}), at);
                        }
                        return true;
                    }
                }
            }
        }
        return false;
    }

    @Test
    void cancelWhileStagingDrainsTheSubmittedReadAndLeaksNoLease() throws IOException {
        m = new ManagerFixture(dir, 64, io.orbitkv.state.protocol.ProtocolLimits.DEFAULTS,
                ManagerBounds.DEFAULTS.withStagesPerOperation(1));
        try (Client c = m.register("e1", 1, NS, ManagerFixture.FULL)) {
            onSsdOnly(c, 4, 0, 1, 2, 3);
            double readsBefore = ssdReads();
            CompletableFuture<Void> hold = holdReads();
            assertThat(c.queryFull(1, 4, 4).status()).isEqualTo(QueryStatus.PENDING);
            Reply.Cancelled cancelled = (Reply.Cancelled) c.send(new Request.Cancel(1));
            assertThat(cancelled.drained()).as("one staging is submitted").isFalse();
            assertThat(Client.error(c.send(Client.query(1, 1, io.orbitkv.state.protocol.CompletionTarget.HOST_READY,
                    65, 0, 4, new int[] {0}, 4)))).as("the id stays occupied while draining").isEqualTo(ErrorCode.BUSY);
            hold.complete(null);
            assertThat(c.sink.await(1, CompletionEvent.DRAINED).outcome()).isEqualTo(Reply.Settled.OK);
            assertThat(ssdReads() - readsBefore).as("queued stagings never reached the disk").isLessThanOrEqualTo(1);
            assertThat(c.sink.find(1, CompletionEvent.QUERY_SETTLED)).isEmpty();
            m.assertNothingHeld();
        }
    }

    @Test
    void overTheStagingBudgetTheBoundaryIsTheLongestThatFitsElseDramOrNoSpace() throws IOException {
        m = new ManagerFixture(dir, 64, io.orbitkv.state.protocol.ProtocolLimits.DEFAULTS,
                ManagerBounds.DEFAULTS.withStagingBudgetBytes(24 * 1024));
        try (Client c = m.register("e1", 1, NS, ManagerFixture.FULL)) {
            onSsdOnly(c, 4, 2, 3);
            c.publish(4, 0, 0, 1);
            Reply.QueryResult r = c.queryFull(1, 4, 4);
            Reply.QueryResult fin = r.status() == QueryStatus.FINAL ? r : settled(c, 1, 0);
            assertThat(fin.boundaryTokens()).as("pages 2..3 would need 48 KiB of staging; page 2 alone fits").isEqualTo(48);
            c.assertBytes(fin, 4);
            c.send(new Request.Release(1));
        }
        m.assertNothingHeld();
    }

    @Test
    void aStagingBudgetBelowOnePageIsNoSpaceWhenOnlySsdPagesCouldHit() throws IOException {
        m = new ManagerFixture(dir, 64, io.orbitkv.state.protocol.ProtocolLimits.DEFAULTS,
                ManagerBounds.DEFAULTS.withStagingBudgetBytes(8 * 1024));
        try (Client c = m.register("e1", 1, NS, ManagerFixture.FULL)) {
            onSsdOnly(c, 9, 0, 1);
            assertThat(Client.error(c.send(Client.query(2, 0, io.orbitkv.state.protocol.CompletionTarget.HOST_READY,
                    33, 0, 9, new int[] {0}, 2)))).as("only SSD pages could hit").isEqualTo(ErrorCode.NO_SPACE);
        }
        m.assertNothingHeld();
    }

    @Test
    void aRestartedManagerServesHitsFromItsSsdStore() throws IOException {
        m = ManagerFixture.open(dir);
        try (Client c = m.register("e1", 1, NS, ManagerFixture.FULL)) {
            c.publish(4, 0, 0, 1, 2);
            m.awaitOnSsd(NS, 4, 0, 1, 2);
        }
        m.restart();
        try (Client c = m.register("e1", 2, NS, ManagerFixture.FULL)) {
            Reply.QueryResult first = c.queryFull(1, 4, 3);
            Reply.QueryResult fin = first.status() == QueryStatus.FINAL ? first : settled(c, 1, 0);
            assertThat(fin.hit()).isTrue();
            assertThat(fin.boundaryTokens()).isEqualTo(48);
            c.assertBytes(fin, 4);
            c.send(new Request.Release(1));
        }
        m.assertNothingHeld();
    }

    @Test
    void aConnectionClosedWithPrepareReadsInFlightGivesTheBudgetBackOnlyAfterTheyDrain() throws IOException {
        m = ManagerFixture.open(dir);
        Client c = m.register("e1", 1, NS, ManagerFixture.FULL);
        onSsdOnly(c, 9, 0, 1, 2);
        CompletableFuture<Void> hold = holdReads();
        Request.Query demand = Client.query(1, 0, CompletionTarget.HOST_READY, 3 * 16 + 1, 0, 9, new int[] {0}, 3);
        Reply reply = c.send(new Request.Prepare(1, 0, 0, demand.promptTokens(), 0, demand.groups()));
        assertThat(reply).isInstanceOfSatisfying(Reply.Prepared.class, p -> {
            assertThat(p.outcome()).isEqualTo(Reply.PrepareOutcome.ACCEPTED);
            assertThat(p.pagesToStage()).isEqualTo(3);
        });
        assertThat(m.core.status().leases()).as("a prepare takes no lease table entry").isZero();
        c.close();
        assertThat(m.core.speculation().held().used()).as("reads submitted before the close still count")
                .isPositive();
        hold.complete(null);
        m.assertNothingHeld();
        assertThat(m.core.preparation().namespaces()).allSatisfy(n -> assertThat(n.consumed()).isZero());
    }
}
