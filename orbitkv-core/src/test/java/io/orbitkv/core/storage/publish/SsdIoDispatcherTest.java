package io.orbitkv.core.storage.publish;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

import static org.assertj.core.api.Assertions.assertThat;

/** The dispatcher against fake operations whose completion the test controls. */
class SsdIoDispatcherTest {

    private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
    private final List<String> started = new ArrayList<>();
    private final List<FakeOp> running = new ArrayList<>();

    /** An operation that records its start and completes when the test says so. */
    private final class FakeOp implements IoOp {
        final String name;
        final CompletableFuture<Void> done = new CompletableFuture<>();
        IoOp.DropReason dropped;

        FakeOp(String name) {
            this.name = name;
        }

        @Override
        public CompletableFuture<?> start() {
            started.add(name);
            running.add(this);
            return done;
        }

        @Override
        public void drop(DropReason reason) {
            dropped = reason;
        }
    }

    private void completeOldestRunning() {
        running.removeFirst().done.complete(null);
    }

    @Test
    void readsOvertakeQueuedWritesAndNeverExceedTheInFlightBound() {
        SsdIoDispatcher d = new SsdIoDispatcher(2, 16, 16, 4, registry, "t");
        d.submitWrite(new FakeOp("w1"));
        d.submitWrite(new FakeOp("w2"));
        d.submitWrite(new FakeOp("w3"));
        assertThat(started).containsExactly("w1", "w2");
        d.submitRead(new FakeOp("r1"));
        d.submitRead(new FakeOp("r2"));
        assertThat(d.inFlight()).isEqualTo(2);
        assertThat(d.depth(true)).isEqualTo(2);
        completeOldestRunning();
        completeOldestRunning();
        // w3 was queued first, but both reads go before it.
        assertThat(started).containsExactly("w1", "w2", "r1", "r2");
        assertThat(d.inFlight()).isEqualTo(2);
        completeOldestRunning();
        assertThat(started).last().isEqualTo("w3");
    }

    @Test
    void aWaitingWriteIsServedAfterAtMostKReadsUnderASteadyReadStream() {
        int k = 3;
        SsdIoDispatcher d = new SsdIoDispatcher(1, 64, 16, k, registry, "t");
        d.submitRead(new FakeOp("r0"));
        d.submitWrite(new FakeOp("w"));
        int readsAfterWriteQueued = 0;
        for (int i = 1; i <= 20; i++) {
            d.submitRead(new FakeOp("r" + i)); // the read lane never runs dry
            completeOldestRunning();
            if (started.contains("w")) break;
            readsAfterWriteQueued++;
        }
        assertThat(started).contains("w");
        // r0 was already running when w arrived; then exactly K reads overtook it, no more.
        assertThat(readsAfterWriteQueued).isEqualTo(k);
        assertThat(started.indexOf("w")).isEqualTo(1 + k);
    }

    @Test
    void aFullWriteLaneDropsItsOldestWrite() {
        SsdIoDispatcher d = new SsdIoDispatcher(1, 4, 2, 4, registry, "t");
        FakeOp blocker = new FakeOp("blocker");
        d.submitRead(blocker);
        FakeOp w1 = new FakeOp("w1");
        FakeOp w2 = new FakeOp("w2");
        FakeOp w3 = new FakeOp("w3");
        assertThat(d.submitWrite(w1)).isEqualTo(SsdIoDispatcher.WriteOffer.QUEUED);
        assertThat(d.submitWrite(w2)).isEqualTo(SsdIoDispatcher.WriteOffer.QUEUED);
        assertThat(d.submitWrite(w3)).isEqualTo(SsdIoDispatcher.WriteOffer.QUEUED_DISPLACING_OLDEST);
        assertThat(w1.dropped).isEqualTo(IoOp.DropReason.LANE_FULL);
        assertThat(registry.get("orbitkv.publish.io.dropped").tag("reason", "lane_full").counter().count())
                .isEqualTo(1.0);
        completeOldestRunning();
        completeOldestRunning();
        assertThat(started).containsExactly("blocker", "w2", "w3");
    }

    @Test
    void aFullReadLaneRefusesAndCloseDropsWhatCannotDrain() {
        SsdIoDispatcher d = new SsdIoDispatcher(1, 1, 4, 4, registry, "t");
        d.submitRead(new FakeOp("blocker"));
        FakeOp queuedRead = new FakeOp("r1");
        FakeOp queuedWrite = new FakeOp("w1");
        assertThat(d.submitRead(queuedRead)).isEqualTo(SsdIoDispatcher.ReadOffer.QUEUED);
        assertThat(d.submitRead(new FakeOp("r2"))).isEqualTo(SsdIoDispatcher.ReadOffer.LANE_FULL);
        d.submitWrite(queuedWrite);
        // Nothing completes: the drain wait runs out, queued work is dropped, the in-flight op is waited for.
        boolean drained = d.close(1_000_000);
        assertThat(drained).isFalse();
        assertThat(queuedRead.dropped).isEqualTo(IoOp.DropReason.CLOSED);
        assertThat(queuedWrite.dropped).isEqualTo(IoOp.DropReason.CLOSED);
        assertThat(d.submitRead(new FakeOp("late"))).isEqualTo(SsdIoDispatcher.ReadOffer.CLOSED);
        completeOldestRunning();
        assertThat(d.inFlight()).isZero();
        assertThat(started).containsExactly("blocker");
    }

    @Test
    void closeLetsQueuedWorkFinishWhenItCan() {
        SsdIoDispatcher d = new SsdIoDispatcher(1, 4, 4, 4, registry, "t");
        // Operations that complete at once: close finds everything done.
        for (int i = 0; i < 3; i++) {
            d.submitWrite(new IoOp() {
                @Override
                public CompletableFuture<?> start() {
                    started.add("w");
                    return CompletableFuture.completedFuture(null);
                }

                @Override
                public void drop(DropReason reason) {
                    throw new AssertionError("nothing should be dropped");
                }
            });
        }
        assertThat(d.close(1_000_000_000L)).isTrue();
        assertThat(started).hasSize(3);
    }
}
