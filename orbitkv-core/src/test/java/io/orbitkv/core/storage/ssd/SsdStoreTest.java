package io.orbitkv.core.storage.ssd;

import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.state.NamespaceDigest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static io.orbitkv.core.storage.ssd.SsdTestSupport.NS;
import static io.orbitkv.core.storage.ssd.SsdTestSupport.key;
import static io.orbitkv.core.storage.ssd.SsdTestSupport.payload;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

class SsdStoreTest {

    @TempDir
    Path dir;

    @Test
    void writeThenPinnedReadServesExactBytesZeroCopyAndThroughBounce() throws Exception {
        try (SsdTestSupport s = SsdTestSupport.openRecovered(SsdTestSupport.smallConfig(dir, 2, 256))) {
            long gen = s.writeCommitted(1, 60_000);
            assertThat(gen).isEqualTo(1);

            Pin pin = (Pin) s.store.pin(key(1), SsdTestSupport.NS);
            assertThat(pin.generation()).isEqualTo(1);
            assertThat(pin.payloadBytes()).isEqualTo(60_000);
            MemorySegment aligned = SsdTestSupport.SHARED.allocate(pin.paddedPayloadBytes(), 4096);
            assertThat(s.store.read(pin, aligned).join()).isEqualTo(new ReadResult.Served(60_000, false));
            assertThat(aligned.asSlice(0, 60_000).mismatch(payload(1, 60_000).asSlice(0, 60_000))).isEqualTo(-1);

            byte[] heap = new byte[60_000];
            assertThat(s.store.read(pin, MemorySegment.ofArray(heap)).join()).isEqualTo(new ReadResult.Served(60_000, true));
            assertThat(MemorySegment.ofArray(heap).mismatch(payload(1, 60_000).asSlice(0, 60_000))).isEqualTo(-1);
            s.store.unpin(pin);

            assertThat(s.counter("orbitkv.ssd.writes")).isEqualTo(1);
            assertThat(s.counter("orbitkv.ssd.write.bytes")).isEqualTo(64 * 1024);
            assertThat(s.counter("orbitkv.ssd.reads")).isEqualTo(2);
            assertThat(s.counter("orbitkv.ssd.read.bytes")).isEqualTo(120_000);
            assertThat(s.counter("orbitkv.ssd.bounce.copies")).isEqualTo(1);
            assertThat(s.gauge("orbitkv.ssd.used")).isEqualTo(64 * 1024);
            assertThat(s.gauge("orbitkv.ssd.capacity")).isEqualTo(512 * 1024);
        }
    }

    @Test
    void unalignedWritePayloadIsCopiedOnceAndReadsBack() throws Exception {
        try (SsdTestSupport s = SsdTestSupport.openRecovered(SsdTestSupport.smallConfig(dir, 2, 256))) {
            byte[] bytes = new byte[5000];
            MemorySegment.copy(payload(7, 5000), 0, MemorySegment.ofArray(bytes), 0, 5000);
            WriteResult r = s.store.write(NS, key(7), MemorySegment.ofArray(bytes), 5000).join();
            assertThat(r).isEqualTo(new WriteResult.Committed(key(7), 1));
            assertThat(s.counter("orbitkv.ssd.bounce.copies")).isEqualTo(1);
            assertThat(s.readAndCheck(7, 5000)).isEqualTo(new ReadResult.Served(5000, false));
        }
    }

    @Test
    void commitRewriteAndDeleteAppendResidencyEventsWithGenerations() throws Exception {
        try (SsdTestSupport s = SsdTestSupport.openRecovered(SsdTestSupport.smallConfig(dir, 2, 256))) {
            long g1 = s.writeCommitted(3, 4096);
            long g2 = s.writeCommitted(3, 4096);
            assertThat(g2).isGreaterThan(g1);
            assertThat(s.store.size()).isEqualTo(1);
            assertThat(s.store.usedBytes()).isEqualTo(8192);
            assertThat(((Pin) s.store.pin(key(3), SsdTestSupport.NS)).generation()).isEqualTo(g2);

            assertThat(s.store.delete(key(3))).isTrue();
            assertThat(s.store.delete(key(3))).isFalse();
            assertThat(s.store.pin(key(3), SsdTestSupport.NS)).isEqualTo(new PinResult.Miss(key(3)));
            assertThat(s.store.usedBytes()).isZero();

            assertThat(s.events()).extracting(ResidencyEvent::kind, ResidencyEvent::generation, ResidencyEvent::medium)
                    .containsExactly(
                            org.assertj.core.groups.Tuple.tuple(ResidencyEvent.Kind.ADDED, g1, ResidencyEvent.Medium.SSD),
                            // the replaced generation leaves before the new one arrives, so an in-order follower ends with it present
                            org.assertj.core.groups.Tuple.tuple(ResidencyEvent.Kind.REMOVED, g1, ResidencyEvent.Medium.SSD),
                            org.assertj.core.groups.Tuple.tuple(ResidencyEvent.Kind.ADDED, g2, ResidencyEvent.Medium.SSD),
                            org.assertj.core.groups.Tuple.tuple(ResidencyEvent.Kind.REMOVED, g2, ResidencyEvent.Medium.SSD));
        }
    }

    @Test
    void theSameKeyInTwoNamespacesIsTwoExtentsThatNeitherReplacesNorRecoversOverTheOther() throws Exception {
        NamespaceDigest other = new NamespaceDigest(0xfeedL, 7, 8, 9);
        SsdConfig config = SsdTestSupport.smallConfig(dir, 2, 256);
        try (SsdTestSupport s = SsdTestSupport.openRecovered(config)) {
            long mine = s.writeCommitted(5, 8000);
            assertThat(s.store.write(other, key(5), payload(6, 8000), 8000).join()).isInstanceOf(WriteResult.Committed.class);
            assertThat(s.store.size()).as("two extents of one key").isEqualTo(2);
            assertThat(s.store.usedBytes()).isEqualTo(2 * 12 * 1024);
            assertThat(((Pin) s.store.pin(key(5), NS)).generation()).as("the first namespace's extent stays").isEqualTo(mine);
            assertThat(s.events()).extracting(ResidencyEvent::kind)
                    .containsExactly(ResidencyEvent.Kind.ADDED, ResidencyEvent.Kind.ADDED);
        }
        try (SsdTestSupport s = SsdTestSupport.openRecovered(config)) {
            assertThat(s.store.size()).as("recovery keeps both").isEqualTo(2);
            assertThat(s.readAndCheck(5, 8000)).isEqualTo(new ReadResult.Served(8000, false));
            try (Pin pin = (Pin) s.store.pin(key(5), other)) {
                assertThat(pin.namespace()).isEqualTo(other);
                MemorySegment dst = SsdTestSupport.SHARED.allocate(pin.paddedPayloadBytes(), 4096);
                assertThat(s.store.read(pin, dst).join()).isEqualTo(new ReadResult.Served(8000, false));
                assertThat(dst.asSlice(0, 8000).mismatch(payload(6, 8000).asSlice(0, 8000))).isEqualTo(-1);
            }
            // Removing one namespace's extent leaves the other's.
            assertThat(s.store.delete(key(5), other)).isTrue();
            assertThat(s.store.contains(key(5), other)).isFalse();
            assertThat(s.store.contains(key(5), NS)).isTrue();
            assertThat(s.readAndCheck(5, 8000)).isEqualTo(new ReadResult.Served(8000, false));
        }
    }

    @Test
    void anOldPinOnASupersededGenerationStillReadsItsOwnBytes() throws Exception {
        try (SsdTestSupport s = SsdTestSupport.openRecovered(SsdTestSupport.smallConfig(dir, 2, 256))) {
            s.writeCommitted(4, 8000);
            Pin old = (Pin) s.store.pin(key(4), SsdTestSupport.NS);
            s.writeCommitted(4, 8000);
            assertThat(((Pin) s.store.pin(key(4), SsdTestSupport.NS)).generation()).isGreaterThan(old.generation());
            MemorySegment dst = SsdTestSupport.SHARED.allocate(old.paddedPayloadBytes(), 4096);
            assertThat(s.store.read(old, dst).join()).isInstanceOf(ReadResult.Served.class);
        }
    }

    @Test
    void aReleasedPinNeverReadsAndUnpinIsIdempotent() throws Exception {
        try (SsdTestSupport s = SsdTestSupport.openRecovered(SsdTestSupport.smallConfig(dir, 2, 256))) {
            s.writeCommitted(1, 4096);
            Pin pin = (Pin) s.store.pin(key(1), SsdTestSupport.NS);
            assertThat(s.store.unpin(pin)).isTrue();
            assertThat(s.store.unpin(pin)).isFalse();
            MemorySegment dst = SsdTestSupport.SHARED.allocate(4096, 4096);
            assertThat(s.store.read(pin, dst).join()).isEqualTo(new ReadResult.Released());
            assertThat(s.counter("orbitkv.ssd.reads")).isZero();
        }
    }

    @Test
    void fullQueueAnswersBusyAtOnceAndCountsIt() throws Exception {
        // One worker, one queue slot. Block the worker on a pinned extent at the ring head, fill the slot, then overflow.
        SsdConfig config = SsdTestSupport.smallConfig(dir, 1, 128).withIo(1, 1)
                .withPinnedWaitNanos(TimeUnit.SECONDS.toNanos(30));
        try (SsdTestSupport s = SsdTestSupport.openRecovered(config)) {
            s.writeCommitted(0, 60_000);
            s.writeCommitted(1, 60_000);
            Pin pinned = (Pin) s.store.pin(key(0), SsdTestSupport.NS);
            CompletableFuture<WriteResult> blocked = s.store.write(NS, key(2), payload(2, 60_000), 60_000);
            await().atMost(10, TimeUnit.SECONDS).until(() -> s.counter("orbitkv.ssd.pinned.waits") == 1);
            CompletableFuture<WriteResult> queued = s.store.write(NS, key(3), payload(3, 60_000), 60_000);
            assertThat(s.gauge("orbitkv.ssd.queue.depth")).isEqualTo(1);
            CompletableFuture<WriteResult> rejected = s.store.write(NS, key(4), payload(4, 60_000), 60_000);
            assertThat(rejected).isCompletedWithValue(new WriteResult.Busy());
            assertThat(s.counter("orbitkv.ssd.errors", "kind", "busy")).isEqualTo(1);

            s.store.unpin(pinned);
            assertThat(blocked.get(10, TimeUnit.SECONDS)).isInstanceOf(WriteResult.Committed.class);
            assertThat(queued.get(10, TimeUnit.SECONDS)).isInstanceOf(WriteResult.Committed.class);
            assertThat(s.store.contains(key(2))).isTrue();
            assertThat(s.store.contains(key(3))).isTrue();
        }
    }

    @Test
    void misuseIsABugNotAResult() throws Exception {
        try (SsdTestSupport s = SsdTestSupport.open(SsdTestSupport.smallConfig(dir, 2, 256))) {
            assertThatThrownBy(() -> s.store.pin(key(1), SsdTestSupport.NS)).isInstanceOf(IllegalStateException.class);
            s.store.recover();
            assertThatThrownBy(() -> s.store.recover()).isInstanceOf(IllegalStateException.class);
            assertThatThrownBy(() -> s.store.write(NS, key(1), payload(1, 4096), 64 * 1024 + 1))
                    .isInstanceOf(IllegalArgumentException.class);
            assertThatThrownBy(() -> s.store.write(NS, key(1), payload(1, 4096), 8192))
                    .isInstanceOf(IllegalArgumentException.class);
        }
    }
}
