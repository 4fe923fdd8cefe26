package io.orbitkv.core.storage.dram;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The heap budget per resident block is 256 bytes (index + policy + slot bookkeeping), measured
 * at the 1 M block target (about 2 s; the 4 GiB arena file stays sparse, only headers are
 * touched). {@code -Dorbitkv.heap.blocks=N} measures at another size. Measured here: 200.6 B at
 * 1 M blocks (195.6 B before the class-pressure clock's reverse key map and mark); 212.8 B at
 * 200 k before them (hash-table slack is proportionally larger there).
 */
class DramHeapFootprintTest {

    private static final double BUDGET_BYTES_PER_BLOCK = 256;

    @TempDir
    Path dir;

    @Test
    void aResidentBlockCostsAtMost256BytesOfHeap() throws Exception {
        int blocks = Integer.getInteger("orbitkv.heap.blocks", 1_000_000);
        DramHeapFootprint.Result r = DramHeapFootprint.measure(dir, blocks);
        System.out.printf("DramHeapFootprint: %d blocks, %d resident, %.1f bytes/block%n",
                r.blocks(), r.residentImages(), r.bytesPerBlock());
        assertThat(r.residentImages()).isEqualTo(blocks);
        assertThat(r.bytesPerBlock()).isLessThanOrEqualTo(BUDGET_BYTES_PER_BLOCK);
    }
}
