package io.orbitkv.bench.storage;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.core.storage.ssd.ExtentLayout;
import io.orbitkv.core.storage.ssd.SsdStore;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The SSD benchmarks' shared ring: sized in whole extents, filled exactly full, one file for fio (buffered I/O allowed). */
class BenchSsdRingTest {

    private static final int BLOCK = 16 * 1024;
    private static final int DEPTH = 4;

    @TempDir
    Path dir;

    @Test
    void aRingHoldsWholeExtentsAndRefusesFewerThanTheMinimum() {
        long footprint = ExtentLayout.footprintBytes(BLOCK);
        assertThat(BenchSsdRing.extents(20 * footprint + footprint / 2, BLOCK)).isEqualTo(20);
        assertThatThrownBy(() -> BenchSsdRing.extents((BenchSsdRing.MIN_EXTENTS - 1) * footprint, BLOCK))
                .isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void payloadsAreAlignedAndDifferPerLane() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment[] p = BenchSsdRing.payloads(arena, BLOCK, DEPTH);
            assertThat(p).hasSize(DEPTH);
            for (MemorySegment s : p) {
                assertThat(s.byteSize()).isEqualTo(ExtentLayout.paddedPayloadBytes(BLOCK));
                assertThat(s.address() % ExtentLayout.BLOCK_BYTES).isZero();
            }
            assertThat(p[0].mismatch(p[1])).isNotNegative();
        }
    }

    @Test
    void fillLeavesTheOneRingFileExactlyFull() throws Exception {
        Path ring = dir.resolve("ring");
        int extents = BenchSsdRing.MIN_EXTENTS;
        try (Arena arena = Arena.ofShared();
             SsdStore store = SsdStore.open(BenchSsdRing.config(ring, extents, BLOCK, DEPTH).withBufferedFallback(true),
                     new ResidencyStream(256), new SimpleMeterRegistry())) {
            store.recover();
            StateKey[] keys = BenchSsdRing.fill(store, new NamespaceDigest(1, 2, 3, 4), extents,
                    BenchSsdRing.payloads(arena, BLOCK, DEPTH), BLOCK, DEPTH);
            assertThat(keys).hasSize(extents).doesNotHaveDuplicates().contains(BenchKeys.key(0), BenchKeys.key(extents - 1));
            assertThat(store.size()).isEqualTo(extents);
            Path file = BenchSsdRing.singleFile(ring);
            assertThat(Files.size(file)).isEqualTo(extents * ExtentLayout.footprintBytes(BLOCK));
        }
        Files.createFile(ring.resolve("stray"));
        assertThatThrownBy(() -> BenchSsdRing.singleFile(ring)).isInstanceOf(IllegalStateException.class);
    }
}
