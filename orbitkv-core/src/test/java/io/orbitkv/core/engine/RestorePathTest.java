package io.orbitkv.core.engine;

import io.orbitkv.state.Namespace;
import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.ProtocolLimits;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The two ways a RESTORE is copied: inline on the thread that handles it (at most
 * {@code restoreInlineBytes}) and by the copy threads (larger), each byte for byte, with one
 * RESTORE_DONE, its metrics, and its leases released; and a region fault on either path.
 */
class RestorePathTest {

    static final Namespace NS = ManagerFixture.namespace("restore-path");
    /** Pages per restore in these tests; the inline bound is set around it. */
    static final int PAGES = 4;

    @TempDir
    Path dir;
    ManagerFixture m;
    /** Holds every copy thread of the fixture until counted down. */
    final CountDownLatch gate = new CountDownLatch(1);

    @AfterEach
    void close() {
        gate.countDown();
        if (m != null) m.close();
    }

    /** One copy thread; RESTOREs of at most {@code inlineBytes} are copied inline. */
    private void open(long inlineBytes) throws IOException {
        m = new ManagerFixture(dir, 64, ProtocolLimits.DEFAULTS,
                ManagerBounds.DEFAULTS.withRestore(1, 8).withRestoreInlineBytes(inlineBytes));
    }

    private Path regionFile(String name) throws IOException {
        return Files.write(dir.resolve(name), new byte[PAGES * ManagerFixture.SLOT]);
    }

    /** Publishes prompt 5's {@code PAGES} pages, registers {@code file}, and QUERYs them as operation 1. */
    private int hitAndRegion(Client c, Path file) {
        c.publish(5, 0, 0, 1, 2, 3);
        int region = ((Reply.RegionRegistered) c.send(new Request.RegisterRegion(file.toString(),
                (long) PAGES * ManagerFixture.SLOT, ManagerFixture.SLOT, PAGES))).regionId();
        Reply.QueryResult r = (Reply.QueryResult) c.send(Client.query(1, 0, CompletionTarget.ENGINE_RESTORE,
                PAGES * 16 + 1, 0, 5, new int[] {0}, PAGES));
        assertThat(r.hit()).isTrue();
        assertThat(m.core.status().leases()).isEqualTo(PAGES);
        return region;
    }

    /** Source page {@code p} to destination page {@code PAGES - 1 - p}: a permutation, so a misplaced page shows. */
    private static Request.Restore reversed(int region) {
        List<Request.RestorePage> pages = new ArrayList<>(PAGES);
        for (int p = 0; p < PAGES; p++) pages.add(new Request.RestorePage(0, p, PAGES - 1 - p));
        return new Request.Restore(1, region, pages);
    }

    private static void assertReversedBytes(Path file) throws IOException {
        byte[] all = Files.readAllBytes(file);
        for (int p = 0; p < PAGES; p++) {
            int at = (PAGES - 1 - p) * ManagerFixture.SLOT;
            assertThat(Arrays.copyOfRange(all, at, at + ManagerFixture.PAGE_BYTES)).as("source page %d", p)
                    .isEqualTo(Client.image(5, 0, p, ManagerFixture.PAGE_BYTES));
        }
    }

    private long restoreDoneEvents(Client c) {
        return c.sink.events.stream().filter(e -> e.event() == CompletionEvent.RESTORE_DONE).count();
    }

    @Test
    void aRestoreUpToTheBoundIsCopiedInlineWhileTheCopyThreadsAreBusy() throws IOException {
        open((long) PAGES * ManagerFixture.PAGE_BYTES); // exactly this restore's bytes: inline
        Path file = regionFile("inline.region");
        try (Client c = m.register("e1", 1, NS, ManagerFixture.FULL)) {
            int region = hitAndRegion(c, file);
            m.occupyCopyThread(gate);
            assertThat(c.send(reversed(region))).isEqualTo(new Reply.RestoreAccepted(1, PAGES));
            // No waiting: the copy ran on this thread, before handle returned, past a blocked copier.
            assertThat(c.sink.find(1, CompletionEvent.RESTORE_DONE)).as("RESTORE_DONE already sent")
                    .hasValueSatisfying(e -> assertThat(e.outcome()).isEqualTo(Reply.Settled.OK));
            assertThat(m.core.copier().tasksInFlight()).as("only the blocking task").isEqualTo(1);
            assertThat(m.core.copier().helpers()).as("no idle thread to share the pages with").isZero();
            assertReversedBytes(file);
            assertThat(m.registry.get("orbitkv.restore.bytes").tag("tier", "dram").counter().count())
                    .isEqualTo((double) PAGES * ManagerFixture.PAGE_BYTES);
            assertThat(m.registry.get("orbitkv.restore.duration").tag("outcome", "ok").timer().count()).isEqualTo(1);
            Reply.Released released = (Reply.Released) c.send(new Request.Release(1));
            assertThat(released.drained()).as("nothing in flight after an inline restore").isTrue();
            assertThat(released.pagesReleased()).isEqualTo(PAGES);
            assertThat(restoreDoneEvents(c)).isEqualTo(1);
        }
        gate.countDown();
        m.assertNothingHeld();
    }

    @Test
    void anInlineRestoreSharesItsPagesWithAnIdleCopyThreadAndReportsOnItsOwnThread() throws IOException {
        open((long) PAGES * ManagerFixture.PAGE_BYTES); // inline, and above a sixteenth of the bound: shared
        Path file = regionFile("shared.region");
        try (Client c = m.register("e1", 1, NS, ManagerFixture.FULL)) {
            int region = hitAndRegion(c, file);
            assertThat(c.send(reversed(region))).isEqualTo(new Reply.RestoreAccepted(1, PAGES));
            // Reported before handle returned: the handling thread waited for the helper's pages.
            assertThat(c.sink.find(1, CompletionEvent.RESTORE_DONE)).as("RESTORE_DONE already sent")
                    .hasValueSatisfying(e -> assertThat(e.outcome()).isEqualTo(Reply.Settled.OK));
            assertThat(m.core.copier().helpers()).as("the idle copy thread was offered the pages").isEqualTo(1);
            assertReversedBytes(file);
            assertThat(m.registry.get("orbitkv.restore.bytes").tag("tier", "dram").counter().count())
                    .isEqualTo((double) PAGES * ManagerFixture.PAGE_BYTES);
            Reply.Released released = (Reply.Released) c.send(new Request.Release(1));
            assertThat(released.drained()).as("nothing in flight after a shared restore").isTrue();
            assertThat(released.pagesReleased()).isEqualTo(PAGES);
            assertThat(restoreDoneEvents(c)).isEqualTo(1);
        }
        org.awaitility.Awaitility.await().atMost(RecordingSink.WAIT).until(() -> m.core.copier().tasksInFlight() == 0);
        m.assertNothingHeld();
    }

    @Test
    void aRestoreAboveTheBoundGoesToTheCopyThreadsAndReportsOnce() throws IOException {
        open((long) (PAGES - 1) * ManagerFixture.PAGE_BYTES); // one page short: the copier's
        Path file = regionFile("copier.region");
        try (Client c = m.register("e1", 1, NS, ManagerFixture.FULL)) {
            int region = hitAndRegion(c, file);
            m.occupyCopyThread(gate);
            assertThat(c.send(reversed(region))).isEqualTo(new Reply.RestoreAccepted(1, PAGES));
            assertThat(c.sink.find(1, CompletionEvent.RESTORE_DONE)).as("queued behind the blocked copy").isEmpty();
            assertThat(Files.readAllBytes(file)).as("nothing copied yet").containsOnly((byte) 0);
            assertThat(Client.error(c.send(reversed(region)))).as("one restore per operation").isEqualTo(ErrorCode.BUSY);
            gate.countDown();
            assertThat(c.sink.await(1, CompletionEvent.RESTORE_DONE).outcome()).isEqualTo(Reply.Settled.OK);
            assertReversedBytes(file);
            assertThat(m.registry.get("orbitkv.restore.bytes").tag("tier", "dram").counter().count())
                    .isEqualTo((double) PAGES * ManagerFixture.PAGE_BYTES);
            c.send(new Request.Release(1));
        }
        m.assertNothingHeld();
        assertThat(m.registry.get("orbitkv.restore.duration").tag("outcome", "ok").timer().count())
                .as("one report per restore").isEqualTo(1);
    }

    @Test
    void aRestoreSplitOverFourCopyThreadsSendsOneRestoreDone() throws IOException {
        m = new ManagerFixture(dir, 64, ProtocolLimits.DEFAULTS,
                ManagerBounds.DEFAULTS.withRestore(4, 16).withRestoreInlineBytes(0));
        Path file = regionFile("shares.region");
        try (Client c = m.register("e1", 1, NS, ManagerFixture.FULL)) {
            int region = hitAndRegion(c, file);
            assertThat(c.send(reversed(region))).isEqualTo(new Reply.RestoreAccepted(1, PAGES));
            assertThat(c.sink.await(1, CompletionEvent.RESTORE_DONE).outcome()).isEqualTo(Reply.Settled.OK);
            assertReversedBytes(file);
            assertThat(c.send(new Request.Release(1))).isInstanceOf(Reply.Released.class);
            m.assertNothingHeld();
            assertThat(restoreDoneEvents(c)).as("four shares, one event").isEqualTo(1);
        }
        assertThat(m.registry.get("orbitkv.restore.duration").tag("outcome", "ok").timer().count()).isEqualTo(1);
    }

    @Test
    void aRegionFaultEndsAnInlineRestoreFailedAndReleasesEverything() throws IOException {
        regionFaultEndsFailed(ManagerBounds.RESTORE_INLINE_BYTES);
    }

    @Test
    void aRegionFaultEndsACopierRestoreFailedAndReleasesEverything() throws IOException {
        regionFaultEndsFailed(0);
    }

    private void regionFaultEndsFailed(long inlineBytes) throws IOException {
        open(inlineBytes);
        Path file = regionFile("shrinking.region");
        try (Client c = m.register("e1", 1, NS, ManagerFixture.FULL)) {
            int region = hitAndRegion(c, file);
            // the engine truncates its own file after REGISTER_REGION: the Manager's mapping has no pages behind it
            try (FileChannel ch = FileChannel.open(file, StandardOpenOption.WRITE)) {
                ch.truncate(0);
            }
            assertThat(c.send(reversed(region))).isEqualTo(new Reply.RestoreAccepted(1, PAGES));
            assertThat(c.sink.await(1, CompletionEvent.RESTORE_DONE).outcome()).isEqualTo(new Reply.Failed(ErrorCode.NOT_FOUND));
            assertThat(m.registry.get("orbitkv.restore.duration").tag("outcome", "failed").timer().count()).isEqualTo(1);
            assertThat(Client.error(c.send(reversed(region)))).as("the faulted region is refused").isEqualTo(ErrorCode.NOT_FOUND);
            assertThat(m.core.status().leases()).as("a FAILED restore keeps its leases until RELEASE").isEqualTo(PAGES);
            assertThat(c.send(new Request.Release(1))).isInstanceOf(Reply.Released.class);
            assertThat(m.core.status().leases()).isZero();
        }
        m.assertNothingHeld();
    }
}
