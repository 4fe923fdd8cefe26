package io.orbitkv.core.storage.ssd;

import io.orbitkv.core.storage.residency.ResidencyEvent;
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
import static org.awaitility.Awaitility.await;

/** Ring wrap: claims, pinned extents, bounded waits, skips, and what old pins see afterwards. */
class SsdRingTest {

    private static final int PAYLOAD = 60_000; // footprint 64 KiB: 4 extents per 256 KiB file, 8 per ring

    @TempDir
    Path dir;

    @Test
    void wrapSkipsAPinnedExtentAfterTheBoundedWaitAndOverwritesUnpinnedOnes() throws Exception {
        try (SsdTestSupport s = SsdTestSupport.openRecovered(SsdTestSupport.smallConfig(dir, 2, 256))) {
            long[] gen = new long[10];
            for (int k = 0; k < 8; k++) gen[k] = s.writeCommitted(k, PAYLOAD);
            Pin pinned = (Pin) s.store.pin(key(0), SsdTestSupport.NS);

            long started = System.nanoTime();
            gen[8] = s.writeCommitted(8, PAYLOAD);
            long waitedNanos = System.nanoTime() - started;

            assertThat(waitedNanos).isGreaterThanOrEqualTo(TimeUnit.MILLISECONDS.toNanos(20));
            assertThat(s.counter("orbitkv.ssd.pinned.waits")).isEqualTo(1);
            assertThat(s.counter("orbitkv.ssd.pinned.skips")).isEqualTo(1);
            // key 0 survived (pinned), key 1 took the write instead
            assertThat(s.store.contains(key(0))).isTrue();
            assertThat(s.store.contains(key(1))).isFalse();
            assertThat(s.store.pin(key(1), SsdTestSupport.NS)).isInstanceOf(PinResult.Miss.class);
            MemorySegment dst = SsdTestSupport.SHARED.allocate(pinned.paddedPayloadBytes(), 4096);
            assertThat(s.store.read(pinned, dst).join()).isInstanceOf(ReadResult.Served.class);
            assertThat(s.readAndCheck(8, PAYLOAD)).isInstanceOf(ReadResult.Served.class);

            gen[9] = s.writeCommitted(9, PAYLOAD); // next slot: key 2 goes, no wait
            assertThat(s.store.contains(key(2))).isFalse();
            assertThat(s.counter("orbitkv.ssd.pinned.skips")).isEqualTo(1);
            assertThat(s.events(ResidencyEvent.Kind.REMOVED)).extracting(ResidencyEvent::key, ResidencyEvent::generation)
                    .containsExactly(org.assertj.core.groups.Tuple.tuple(key(1), gen[1]),
                            org.assertj.core.groups.Tuple.tuple(key(2), gen[2]));
            assertThat(s.store.size()).isEqualTo(8);
            s.store.unpin(pinned);
            assertThat(gen[9]).isGreaterThan(gen[8]).isGreaterThan(gen[7]);
        }
    }

    @Test
    void anUnpinDuringTheWaitLetsTheWriterOverwriteWithoutSkipping() throws Exception {
        SsdConfig config = SsdTestSupport.smallConfig(dir, 2, 256).withPinnedWaitNanos(TimeUnit.SECONDS.toNanos(30));
        try (SsdTestSupport s = SsdTestSupport.openRecovered(config)) {
            for (int k = 0; k < 8; k++) s.writeCommitted(k, PAYLOAD);
            Pin pinned = (Pin) s.store.pin(key(0), SsdTestSupport.NS);
            CompletableFuture<WriteResult> write = s.store.write(NS, key(8), payload(8, PAYLOAD), PAYLOAD);
            await().atMost(10, TimeUnit.SECONDS).until(() -> s.counter("orbitkv.ssd.pinned.waits") == 1);
            assertThat(write).isNotDone();

            s.store.unpin(pinned);
            assertThat(write.get(10, TimeUnit.SECONDS)).isInstanceOf(WriteResult.Committed.class);
            assertThat(s.counter("orbitkv.ssd.pinned.skips")).isZero();
            assertThat(s.store.contains(key(0))).isFalse();
            assertThat(s.store.contains(key(1))).isTrue();
            // the old pin was released: it reads nothing, even though its bytes are gone
            MemorySegment dst = SsdTestSupport.SHARED.allocate(pinned.paddedPayloadBytes(), 4096);
            assertThat(s.store.read(pinned, dst).join()).isEqualTo(new ReadResult.Released());
        }
    }

    @Test
    void aRingOfOnlyPinnedExtentsAnswersRingFullThenRecovers() throws Exception {
        try (SsdTestSupport s = SsdTestSupport.openRecovered(SsdTestSupport.smallConfig(dir, 1, 128))) {
            s.writeCommitted(0, PAYLOAD);
            s.writeCommitted(1, PAYLOAD);
            Pin p0 = (Pin) s.store.pin(key(0), SsdTestSupport.NS);
            Pin p1 = (Pin) s.store.pin(key(1), SsdTestSupport.NS);
            assertThat(s.write(2, PAYLOAD)).isEqualTo(new WriteResult.RingFull());
            assertThat(s.counter("orbitkv.ssd.errors", "kind", "ring_full")).isEqualTo(1);
            assertThat(s.store.contains(key(0))).isTrue();
            assertThat(s.store.contains(key(1))).isTrue();
            s.store.unpin(p0);
            s.store.unpin(p1);
            s.writeCommitted(2, PAYLOAD);
            assertThat(s.readAndCheck(2, PAYLOAD)).isInstanceOf(ReadResult.Served.class);
        }
    }

    @Test
    void extentsOfMixedSizesNeverOverlapAndClaimedOnesLeaveTheIndex() throws Exception {
        try (SsdTestSupport s = SsdTestSupport.openRecovered(SsdTestSupport.smallConfig(dir, 2, 256))) {
            int[] lengths = {1, 4096, 4097, 30_000, 65_536, 12_000, 50_000, 8191};
            for (int i = 0; i < 40; i++) {
                s.writeCommitted(i, lengths[i % lengths.length]);
                var placed = s.store.ring().placedExtents();
                placed.sort(java.util.Comparator.comparingInt((Extent e) -> e.file).thenComparingLong(e -> e.offset));
                for (int j = 1; j < placed.size(); j++) {
                    Extent a = placed.get(j - 1);
                    Extent b = placed.get(j);
                    if (a.file == b.file) assertThat(a.endOffset()).as("%s overlaps %s", a, b).isLessThanOrEqualTo(b.offset);
                }
                long used = s.store.indexedExtents().stream().mapToLong(Extent::footprintBytes).sum();
                assertThat(s.store.usedBytes()).isEqualTo(used).isLessThanOrEqualTo(512 * 1024);
            }
            for (int i = 0; i < 40; i++) {
                ReadResult r = s.readAndCheck(i, lengths[i % lengths.length]);
                if (r != null) assertThat(r).isInstanceOf(ReadResult.Served.class);
            }
            assertThat(s.events(ResidencyEvent.Kind.ADDED).size() - s.events(ResidencyEvent.Kind.REMOVED).size())
                    .isEqualTo(s.store.size());
        }
    }
}
