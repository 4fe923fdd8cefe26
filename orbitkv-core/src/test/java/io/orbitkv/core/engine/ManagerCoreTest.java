package io.orbitkv.core.engine;

import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.PageState;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import io.orbitkv.state.protocol.SettleOutcome;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

class ManagerCoreTest {

    static final Namespace NS = ManagerFixture.namespace("model-a");
    static final RecoveryContract FULL = ManagerFixture.FULL;

    @TempDir
    Path dir;
    ManagerFixture m;

    @BeforeEach
    void open() throws IOException {
        m = ManagerFixture.open(dir);
    }

    @AfterEach
    void close() {
        m.close();
    }

    static List<PageState> states(Reply.QueryResult r, int group) {
        return r.groups().stream().filter(g -> g.groupId() == group)
                .flatMap(g -> g.spans().stream()).flatMap(s -> s.pages().stream()).map(Reply.PageResult::state).toList();
    }

    static List<long[]> spans(Reply.QueryResult r, int group) {
        return r.groups().stream().filter(g -> g.groupId() == group).flatMap(g -> g.spans().stream())
                .map(s -> new long[] {s.firstPage(), s.endPage()}).toList();
    }

    @Test
    void publishedPagesHitHostReadyWithTheirBytesReadableAtTheLease() {
        try (Client c = m.register("e1", 1, NS, FULL)) {
            assertThat(c.publish(7, 0, 0, 1, 2, 3)).containsOnly(SettleOutcome.SEALED);
            Reply.QueryResult r = c.queryFull(1, 7, 4);
            assertThat(r.status()).isEqualTo(QueryStatus.FINAL);
            assertThat(r.hit()).isTrue();
            assertThat(r.boundaryTokens()).isEqualTo(64);
            assertThat(states(r, 0)).containsExactly(PageState.RESIDENT, PageState.RESIDENT, PageState.RESIDENT,
                    PageState.RESIDENT);
            c.assertBytes(r, 7);
            assertThat(m.core.status().leases()).isEqualTo(4);

            Reply.Released released = (Reply.Released) c.send(new Request.Release(1));
            assertThat(released.drained()).isTrue();
            assertThat(released.pagesReleased()).isEqualTo(4);
            assertThat(Client.error(c.send(new Request.QueryPoll(1, 0)))).isEqualTo(ErrorCode.NOT_FOUND);
        }
        m.assertNothingHeld();
        assertThat(m.registry.get("orbitkv.manager.queries").tag("outcome", "hit").counter().count()).isEqualTo(1);
        assertThat(m.registry.get("orbitkv.manager.pages.leased").counter().count()).isEqualTo(4);
    }

    @Test
    void aHugePromptTokensCountCostsWorkForTheNamedPagesOnly() {
        // prompt_tokens = 2^62 once made the boundary scan walk 2^58 candidates: the Manager never answered
        RecoveryContract hybrid = new RecoveryContract(16, List.of(new StateGroup.Full(0),
                new StateGroup.SlidingWindow(1, 64, 0), new StateGroup.Recurrent(2)));
        org.junit.jupiter.api.Assertions.assertTimeoutPreemptively(java.time.Duration.ofSeconds(10), () -> {
            try (Client c = m.register("e1", 1, NS, FULL)) {
                c.publish(7, 0, 0);
                Reply.QueryResult hit = (Reply.QueryResult) c.send(Client.query(1, 0, CompletionTarget.HOST_READY,
                        1L << 62, 0, 7, new int[] {0}, 1));
                assertThat(hit.hit()).as("the named page is still served").isTrue();
                assertThat(hit.boundaryTokens()).isEqualTo(16);
                c.send(new Request.Release(1));
                Reply.QueryResult miss = (Reply.QueryResult) c.send(Client.query(2, 0, CompletionTarget.HOST_READY,
                        1L << 62, 0, 99, new int[] {0}, 1));
                assertThat(miss.hit()).isFalse();
                c.send(new Request.Release(2));
            }
            try (Client c = m.register("e2", 1, NS, hybrid)) {
                Reply.QueryResult miss = (Reply.QueryResult) c.send(Client.query(1, 0, CompletionTarget.HOST_READY,
                        1L << 62, 0, 8, new int[] {0, 1, 2}, 1));
                assertThat(miss.hit()).isFalse();
                c.send(new Request.Release(1));
            }
        });
        m.assertNothingHeld();
    }

    @Test
    void partialHitLeasesOnlyThePrefixAndAMissHoldsNothing() {
        try (Client c = m.register("e1", 1, NS, FULL)) {
            c.publish(7, 0, 0, 1, 3);
            Reply.QueryResult r = c.queryFull(1, 7, 4);
            assertThat(r.hit()).isTrue();
            assertThat(r.boundaryTokens()).isEqualTo(32);
            assertThat(spans(r, 0)).containsExactly(new long[] {0, 2});
            assertThat(m.core.status().leases()).as("page 3 is not leased").isEqualTo(2);
            c.assertBytes(r, 7);

            Reply.QueryResult miss = c.queryFull(2, 99, 4);
            assertThat(miss.status()).isEqualTo(QueryStatus.FINAL);
            assertThat(miss.hit()).isFalse();
            assertThat(miss.boundaryTokens()).isZero();
            assertThat(states(miss, 0)).containsOnly(PageState.MISS);
            assertThat(m.core.status().leases()).isEqualTo(2);
            c.send(new Request.Release(1));
            c.send(new Request.Release(2));
        }
        m.assertNothingHeld();
    }

    @Test
    void aColdQueryLooksUpOnlyUpToTheFirstMissingFullAttentionPage() {
        RecoveryContract hybrid = new RecoveryContract(16, List.of(new StateGroup.Full(0),
                new StateGroup.SlidingWindow(1, 64, 0), new StateGroup.Recurrent(2)));
        try (Client c = m.register("e1", 1, NS, hybrid)) {
            c.publish(8, 0, 0, 1);
            c.publish(8, 1, 0, 1, 2, 3, 4, 5, 6, 7, 8);
            double missesBefore = m.registry.get("orbitkv.dram.misses").counter().count();
            double hitsBefore = m.registry.get("orbitkv.dram.hits").functionCounter().count();
            Reply.QueryResult r = (Reply.QueryResult) c.send(Client.query(1, 0, CompletionTarget.HOST_READY,
                    1024 * 16 + 1, 0, 8, new int[] {0, 1, 2}, 1024));
            assertThat(r.hit()).as("no checkpoint published").isFalse();
            double lookups = m.registry.get("orbitkv.dram.misses").counter().count() - missesBefore
                    + m.registry.get("orbitkv.dram.hits").functionCounter().count() - hitsBefore;
            assertThat(lookups).as("3 full pages, 2 window pages, 2 checkpoints of 3 x 1,024").isEqualTo(7);
            c.send(new Request.Release(1));
        }
        m.assertNothingHeld();
    }

    @Test
    void hybridContractSelectsTheLegalBoundaryNotTheLongestAttentionMatch() {
        RecoveryContract hybrid = new RecoveryContract(16, List.of(new StateGroup.Full(0),
                new StateGroup.SlidingWindow(1, 32, 16), new StateGroup.Recurrent(2)));
        try (Client c = m.register("e1", 1, NS, hybrid)) {
            c.publish(5, 0, 0, 1, 2, 3, 4, 5, 6, 7);
            c.publish(5, 1, 0, 1, 2, 3, 4, 5, 6, 7);
            c.publish(5, 2, 4); // only the checkpoint at token 80
            Reply.QueryResult r = (Reply.QueryResult) c.send(Client.query(1, 0, CompletionTarget.HOST_READY,
                    8 * 16 + 1, 0, 5, new int[] {0, 1, 2}, 8));
            assertThat(r.hit()).isTrue();
            assertThat(r.boundaryTokens()).as("attention alone would reach 128").isEqualTo(80);
            assertThat(spans(r, 0)).containsExactly(new long[] {0, 5});
            assertThat(spans(r, 1)).as("sink page 0 and window pages 3..4").containsExactly(new long[] {0, 1},
                    new long[] {3, 5});
            assertThat(spans(r, 2)).containsExactly(new long[] {4, 5});
            assertThat(m.core.status().leases()).as("exactly the required ranges").isEqualTo(5 + 3 + 1);
            c.assertBytes(r, 5);
            c.send(new Request.Release(1));
        }
        m.assertNothingHeld();
    }

    @Test
    void engineRestoreCopiesLeasedPagesIntoTheRegionThenTheyAreReady() throws IOException {
        Path regionFile = dir.resolve("region.bin");
        int pageBytes = 24 * 1024;
        try (FileChannel ch = FileChannel.open(regionFile, StandardOpenOption.CREATE, StandardOpenOption.READ,
                StandardOpenOption.WRITE)) {
            ch.truncate(0);
            ch.write(java.nio.ByteBuffer.allocate(1), 8L * pageBytes - 1);
        }
        try (Client c = m.register("e1", 1, NS, FULL); Arena arena = Arena.ofConfined()) {
            c.publish(3, 0, 0, 1, 2);
            Reply reg = c.send(new Request.RegisterRegion(regionFile.toString(), 8L * pageBytes, pageBytes, 8));
            int region = ((Reply.RegionRegistered) reg).regionId();
            assertThat(Client.error(c.send(new Request.RegisterRegion(dir.resolve("absent").toString(), 4096, 4096, 1))))
                    .isEqualTo(ErrorCode.NOT_FOUND);
            Reply.QueryResult r = (Reply.QueryResult) c.send(Client.query(1, 0, CompletionTarget.ENGINE_RESTORE,
                    3 * 16 + 1, 0, 3, new int[] {0}, 3));
            assertThat(r.boundaryTokens()).isEqualTo(48);
            Reply accepted = c.send(new Request.Restore(1, region, List.of(new Request.RestorePage(0, 0, 5),
                    new Request.RestorePage(0, 1, 2), new Request.RestorePage(0, 2, 0))));
            assertThat(accepted).isEqualTo(new Reply.RestoreAccepted(1, 3));
            assertThat(c.sink.await(1, CompletionEvent.RESTORE_DONE).outcome()).isEqualTo(Reply.Settled.OK);
            assertThat(states((Reply.QueryResult) c.send(new Request.QueryPoll(1, 0)), 0)).containsOnly(PageState.READY);

            MemorySegment file;
            try (FileChannel ch = FileChannel.open(regionFile, StandardOpenOption.READ)) {
                file = ch.map(FileChannel.MapMode.READ_ONLY, 0, 8L * pageBytes, arena);
            }
            int[][] placed = {{0, 5}, {1, 2}, {2, 0}};
            for (int[] p : placed) {
                assertThat(file.asSlice((long) p[1] * pageBytes, ManagerFixture.PAGE_BYTES).toArray(ValueLayout.JAVA_BYTE))
                        .isEqualTo(Client.image(3, 0, p[0], ManagerFixture.PAGE_BYTES));
            }
            assertThat(m.registry.get("orbitkv.restore.bytes").tag("tier", "dram").counter().count())
                    .as("restored pages that were resident in DRAM").isEqualTo(3.0 * ManagerFixture.PAGE_BYTES);
            assertThat(m.registry.get("orbitkv.restore.duration").tag("outcome", "ok").timer().count()).isEqualTo(1);
            assertThat(Client.error(c.send(new Request.Restore(1, region, List.of(new Request.RestorePage(0, 0, 8))))))
                    .as("destination out of range").isEqualTo(ErrorCode.INVALID_DEMAND);
            assertThat(Client.error(c.send(new Request.Restore(1, region, List.of(new Request.RestorePage(0, 3, 1))))))
                    .as("source page not leased").isEqualTo(ErrorCode.NOT_FOUND);
            Reply again = c.send(new Request.Restore(1, region, List.of(new Request.RestorePage(0, 0, 7))));
            assertThat(again).as("a second RESTORE of a READY page").isInstanceOf(Reply.Error.class);
            assertThat(((Reply.Error) again).code()).isEqualTo(ErrorCode.INVALID_DEMAND);
            assertThat(((Reply.Error) again).message()).contains("READY");
            assertThat(file.asSlice(7L * pageBytes, ManagerFixture.PAGE_BYTES).toArray(ValueLayout.JAVA_BYTE))
                    .as("nothing was copied").containsOnly((byte) 0);
            assertThat(m.registry.get("orbitkv.restore.duration").tag("outcome", "ok").timer().count()).isEqualTo(1);
            c.send(new Request.Release(1));
        }
        m.assertNothingHeld();
        assertThat(m.core.status().regions()).isZero();
    }

    @Test
    void aRestoreIntoARegionWhoseFileShrankEndsFailedAndReleasesEverything() throws IOException {
        Path regionFile = dir.resolve("shrinking.region");
        int pageBytes = 24 * 1024;
        try (FileChannel ch = FileChannel.open(regionFile, StandardOpenOption.CREATE, StandardOpenOption.READ,
                StandardOpenOption.WRITE)) {
            ch.write(java.nio.ByteBuffer.allocate(1), 4L * pageBytes - 1);
        }
        try (Client c = m.register("e1", 1, NS, FULL)) {
            c.publish(3, 0, 0, 1, 2);
            int region = ((Reply.RegionRegistered) c.send(new Request.RegisterRegion(regionFile.toString(),
                    4L * pageBytes, pageBytes, 4))).regionId();
            // the engine truncates its own file after REGISTER_REGION: the Manager's mapping has no pages behind it
            try (FileChannel ch = FileChannel.open(regionFile, StandardOpenOption.WRITE)) {
                ch.truncate(0);
            }
            Reply.QueryResult r = (Reply.QueryResult) c.send(Client.query(1, 0, CompletionTarget.ENGINE_RESTORE,
                    3 * 16 + 1, 0, 3, new int[] {0}, 3));
            assertThat(r.hit()).isTrue();
            assertThat(c.send(new Request.Restore(1, region, List.of(new Request.RestorePage(0, 0, 0),
                    new Request.RestorePage(0, 1, 1))))).isEqualTo(new Reply.RestoreAccepted(1, 2));
            assertThat(c.sink.await(1, CompletionEvent.RESTORE_DONE).outcome())
                    .isEqualTo(new Reply.Failed(ErrorCode.NOT_FOUND));
            assertThat(m.registry.get("orbitkv.restore.duration").tag("outcome", "failed").timer().count()).isEqualTo(1);
            Reply again = c.send(new Request.Restore(1, region, List.of(new Request.RestorePage(0, 2, 2))));
            assertThat(Client.error(again)).as("the faulted region is refused").isEqualTo(ErrorCode.NOT_FOUND);
            assertThat(((Reply.Error) again).message()).contains("unusable");
            assertThat(c.send(new Request.Release(1))).isInstanceOf(Reply.Released.class);
            assertThat(m.core.status().leases()).as("RELEASE drained the failed restore").isZero();
        }
        m.assertNothingHeld();
        assertThat(m.core.status().regions()).isZero();
    }

    @Test
    void hostReadyOperationsCannotRestore() throws IOException {
        try (Client c = m.register("e1", 1, NS, FULL)) {
            c.publish(3, 0, 0);
            Path regionFile = Files.write(dir.resolve("r"), new byte[ManagerFixture.SLOT]);
            int region = ((Reply.RegionRegistered) c.send(new Request.RegisterRegion(regionFile.toString(),
                    ManagerFixture.SLOT, ManagerFixture.SLOT, 1))).regionId();
            c.queryFull(1, 3, 1);
            assertThat(Client.error(c.send(new Request.Restore(1, region, List.of(new Request.RestorePage(0, 0, 0))))))
                    .isEqualTo(ErrorCode.INVALID_DEMAND);
        }
        m.assertNothingHeld();
    }

    @Test
    void aNewRevisionReplacesTheOperationAndAStaleOneIsRefused() {
        try (Client c = m.register("e1", 1, NS, FULL)) {
            c.publish(7, 0, 0, 1, 2, 3);
            Reply.QueryResult first = (Reply.QueryResult) c.send(Client.query(1, 0, CompletionTarget.HOST_READY,
                    2 * 16 + 1, 0, 7, new int[] {0}, 2));
            assertThat(first.boundaryTokens()).isEqualTo(32);
            Reply.QueryResult second = (Reply.QueryResult) c.send(Client.query(1, 1, CompletionTarget.HOST_READY,
                    4 * 16 + 1, 0, 7, new int[] {0}, 4));
            assertThat(second.revision()).isEqualTo(1);
            assertThat(second.boundaryTokens()).isEqualTo(64);
            assertThat(m.core.status().leases()).as("the old revision's leases are released").isEqualTo(4);
            assertThat(Client.error(c.send(Client.query(1, 1, CompletionTarget.HOST_READY, 17, 0, 7, new int[] {0}, 1))))
                    .isEqualTo(ErrorCode.STALE_REVISION);
            assertThat(Client.error(c.send(new Request.QueryPoll(1, 0)))).isEqualTo(ErrorCode.STALE_REVISION);
            assertThat(((Reply.QueryResult) c.send(new Request.QueryPoll(1, 1))).boundaryTokens()).isEqualTo(64);
            assertThat(m.core.status().leases()).as("a refused revision changes nothing").isEqualTo(4);
            c.send(new Request.Cancel(1));
        }
        m.assertNothingHeld();
    }

    @Test
    void queriesAreValidatedAgainstTheContract() {
        RecoveryContract two = new RecoveryContract(16, List.of(new StateGroup.Full(0), new StateGroup.Full(1)));
        try (Client c = m.register("e1", 1, NS, two)) {
            assertThat(Client.error(c.send(Client.query(1, 0, CompletionTarget.HOST_READY, 65, 0, 1, new int[] {0}, 4))))
                    .as("group 1 missing").isEqualTo(ErrorCode.INVALID_DEMAND);
            assertThat(Client.error(c.send(Client.query(1, 0, CompletionTarget.HOST_READY, 65, 0, 1, new int[] {0, 1, 9}, 4))))
                    .as("unknown group").isEqualTo(ErrorCode.NAMESPACE_MISMATCH);
            assertThat(Client.error(c.send(Client.query(1, 0, CompletionTarget.HOST_READY, 65, 5, 1, new int[] {0, 1}, 4))))
                    .as("origin not page aligned").isEqualTo(ErrorCode.INVALID_DEMAND);
        }
        m.assertNothingHeld();
    }

    @Test
    void framesBeforeRegisterAndASecondRegisterAreOutOfOrder() {
        try (Client c = m.connect()) {
            assertThat(Client.error(c.send(new Request.Stats()))).isEqualTo(ErrorCode.OUT_OF_ORDER);
            c.registerOk("e1", 1, NS, FULL);
            assertThat(Client.error(c.register("e1", 1, NS, FULL))).isEqualTo(ErrorCode.OUT_OF_ORDER);
            Reply.StatsReply stats = (Reply.StatsReply) c.send(new Request.Stats());
            assertThat(stats.counters()).extracting(Reply.Counter::name)
                    .contains("connections", "operations", "leases", "reservations", "query_hits", "busy_rejections");
        }
    }

    @Test
    void theRegisteredReplyAnnouncesTheArenaFilesWithAbsoluteOffsets() {
        try (Client c = m.register("e1", 1, NS, FULL)) {
            Reply.ArenaFile f = c.registered.arenas().getFirst();
            assertThat(f.slotBytes()).isEqualTo(ManagerFixture.SLOT);
            assertThat(f.sizeBytes()).isEqualTo(4096L + (long) ManagerFixture.SLOT * m.dramSlots);
            assertThat(c.registered.limits()).isEqualTo(m.limits);
        }
    }
}
