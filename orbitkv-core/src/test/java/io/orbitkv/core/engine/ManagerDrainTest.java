package io.orbitkv.core.engine;

import io.orbitkv.core.storage.publish.IoOp;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.ProtocolLimits;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/** Draining: restores released mid-copy, revisions replaced mid-staging, and Manager shutdown. */
class ManagerDrainTest {

    static final Namespace NS = ManagerFixture.namespace("model-a");

    @TempDir
    Path dir;
    ManagerFixture m;

    @AfterEach
    void close() {
        if (m != null) m.close();
    }

    @Test
    void releaseDuringARestoreDropsQueuedCopiesAndDrainsBeforeReleasing() throws Exception {
        // every restore on the one copy thread (none inline), so this one queues behind a blocked copy
        m = new ManagerFixture(dir, 64, ProtocolLimits.DEFAULTS, ManagerBounds.DEFAULTS.withRestore(1, 8)
                .withRestoreInlineBytes(0));
        Path regionFile = Files.write(dir.resolve("region"), new byte[4 * ManagerFixture.SLOT]);
        try (Client c = m.register("e1", 1, NS, ManagerFixture.FULL)) {
            c.publish(3, 0, 0, 1);
            int region = ((Reply.RegionRegistered) c.send(new Request.RegisterRegion(regionFile.toString(),
                    4L * ManagerFixture.SLOT, ManagerFixture.SLOT, 4))).regionId();
            assertThat(((Reply.QueryResult) c.send(Client.query(1, 0, CompletionTarget.ENGINE_RESTORE, 33, 0, 3,
                    new int[] {0}, 2))).hit()).isTrue();

            CountDownLatch gate = new CountDownLatch(1);
            m.occupyCopyThread(gate);
            assertThat(c.send(new Request.Restore(1, region, List.of(new Request.RestorePage(0, 0, 0),
                    new Request.RestorePage(0, 1, 1))))).isEqualTo(new Reply.RestoreAccepted(1, 2));
            assertThat(Client.error(c.send(new Request.Restore(1, region, List.of(new Request.RestorePage(0, 0, 2))))))
                    .as("one restore per operation").isEqualTo(ErrorCode.BUSY);

            Reply.Released released = (Reply.Released) c.send(new Request.Release(1));
            assertThat(released.drained()).as("the copy is submitted").isFalse();
            assertThat(released.pagesReleased()).as("the copy still reads the leases").isZero();
            assertThat(m.core.status().leases()).isEqualTo(2);
            gate.countDown();
            assertThat(c.sink.await(1, CompletionEvent.RESTORE_DONE).outcome()).isEqualTo(Reply.Settled.CANCELLED);
            c.sink.await(1, CompletionEvent.DRAINED);
            assertThat(Files.readAllBytes(regionFile)).as("queued copies never ran").containsOnly((byte) 0);
        }
        m.assertNothingHeld();
    }

    @Test
    void aRevisionReplacedWhileStagingDrainsAndSaysSo() throws IOException {
        m = new ManagerFixture(dir, 64, ProtocolLimits.DEFAULTS, ManagerBounds.DEFAULTS);
        try (Client c = m.register("e1", 1, NS, ManagerFixture.FULL)) {
            c.publish(4, 0, 0, 1);
            for (long p = 0; p < 2; p++) {
                StateKey key = Client.key(NS, 4, 0, p);
                await().atMost(RecordingSink.WAIT).until(() -> m.store.ssd().contains(key));
                m.store.dram().evict(key);
            }
            m.assertNothingHeld();
            CompletableFuture<Void> hold = new CompletableFuture<>();
            m.store.dispatcher().submitRead(new IoOp() {
                @Override
                public CompletableFuture<?> start() {
                    return hold;
                }

                @Override
                public void drop(DropReason reason) {
                }
            });
            assertThat(c.queryFull(1, 4, 2).status()).isEqualTo(QueryStatus.PENDING);
            Reply.QueryResult next = (Reply.QueryResult) c.send(Client.query(1, 1, CompletionTarget.HOST_READY, 17, 0,
                    99, new int[] {0}, 1));
            assertThat(next.revision()).isEqualTo(1);
            assertThat(next.hit()).isFalse();
            assertThat(m.core.status().operations()).as("the old revision drains beside the new one").isEqualTo(2);
            hold.complete(null);
            Reply.Completion drained = c.sink.await(1, CompletionEvent.DRAINED);
            assertThat(drained.revision()).isZero();
            assertThat(c.sink.find(1, CompletionEvent.QUERY_SETTLED)).isEmpty();
            c.send(new Request.Release(1));
        }
        m.assertNothingHeld();
    }

    @Test
    void aRegisterWhosePredecessorDoesNotDrainInTimeIsBusyAndARetryWaitsForTheDrain() throws IOException {
        ManagerBounds d = ManagerBounds.DEFAULTS;
        m = new ManagerFixture(dir, 64, ProtocolLimits.DEFAULTS, d.withFenceDrainTimeoutNanos(
                java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(200)));
        Client old = m.register("e1", 1, NS, ManagerFixture.FULL);
        old.publish(4, 0, 0);
        StateKey key = Client.key(NS, 4, 0, 0);
        await().atMost(RecordingSink.WAIT).until(() -> m.store.ssd().contains(key));
        m.store.dram().evict(key);
        CompletableFuture<Void> hold = new CompletableFuture<>();
        m.store.dispatcher().submitRead(new IoOp() {
            @Override
            public CompletableFuture<?> start() {
                return hold;
            }

            @Override
            public void drop(DropReason reason) {
            }
        });
        assertThat(old.queryFull(1, 4, 1).status()).isEqualTo(QueryStatus.PENDING);
        try (Client next = m.connect()) {
            assertThat(Client.error(next.register("e1", 2, NS, ManagerFixture.FULL))).isEqualTo(ErrorCode.BUSY);
            assertThat(old.sink.fenced).isEqualTo(ErrorCode.STALE_EPOCH);
            hold.complete(null);
            next.registerOk("e1", 2, NS, ManagerFixture.FULL);
            assertThat(m.core.status().leases()).as("the fenced incarnation drained first").isZero();
        }
        old.close();
        m.assertNothingHeld();
    }

    @Test
    void closingTheManagerFencesEverySessionAndRefusesNewOnes() throws IOException {
        m = ManagerFixture.open(dir);
        Client c = m.register("e1", 1, NS, ManagerFixture.FULL);
        c.publish(1, 0, 0);
        assertThat(c.queryFull(1, 1, 1).hit()).isTrue();
        Client waiting = m.connect();
        m.core.close();
        assertThat(c.sink.fenced).isEqualTo(ErrorCode.SHUTTING_DOWN);
        assertThat(waiting.sink.fenced).isEqualTo(ErrorCode.SHUTTING_DOWN);
        assertThat(Client.error(waiting.register("e2", 1, NS, ManagerFixture.FULL))).isEqualTo(ErrorCode.SHUTTING_DOWN);
        assertThat(m.core.openSession(new RecordingSink(), java.util.Optional.of(ManagerFixture.self()))).isInstanceOf(OpenResult.Refused.class);
        assertThat(m.core.status().leases()).isZero();
        // The publish pipeline may still hold a lease while it writes the page to SSD.
        await().atMost(RecordingSink.WAIT).until(() -> m.store.dram().usage().leases() == 0);
        c.close();
        waiting.close();
    }
}
