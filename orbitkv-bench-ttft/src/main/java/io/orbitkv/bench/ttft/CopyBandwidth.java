package io.orbitkv.bench.ttft;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;

/**
 * Measures {@link MemorySegment#copy} bandwidth in page-sized chunks between two off-heap
 * buffers larger than the last-level cache: the copy a restore does from the Manager's mapped
 * arena, measured in the same run as the TTFTs it explains.
 *
 * <p>Stateless; allocates and frees its buffers per call. Single-threaded.
 *
 * <p>Design note: 128 MiB per side (4x a 32 MiB L3) so every chunk comes from and goes to DRAM,
 * as a restore of pages leased from a 64 MiB arena does; the median of 7 rounds is reported,
 * after 3 discarded ones (interpreted 4 KiB copies measured 2 GB/s, compiled ones over 10).
 */
final class CopyBandwidth {

    static final long BUFFER_BYTES = 128L << 20;
    static final int ROUNDS = 7;
    /** Rounds run first and discarded: the copy loop is compiled by then. */
    static final int WARMUP_ROUNDS = 3;

    private CopyBandwidth() {
    }

    /** Bytes per second copying {@code chunkBytes} chunks, median of {@link #ROUNDS} rounds over the buffers. */
    static double measure(long chunkBytes) {
        if (chunkBytes < 1 || chunkBytes > BUFFER_BYTES) throw new IllegalArgumentException("chunk " + chunkBytes);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment src = arena.allocate(BUFFER_BYTES, 4096);
            MemorySegment dst = arena.allocate(BUFFER_BYTES, 4096);
            src.fill((byte) 1);
            dst.fill((byte) 2);
            long chunks = BUFFER_BYTES / chunkBytes;
            double[] rates = new double[ROUNDS];
            for (int round = -WARMUP_ROUNDS; round < ROUNDS; round++) {
                long t0 = System.nanoTime();
                for (long c = 0; c < chunks; c++) MemorySegment.copy(src, c * chunkBytes, dst, c * chunkBytes, chunkBytes);
                if (round >= 0) rates[round] = chunks * chunkBytes / ((System.nanoTime() - t0) / 1e9);
            }
            Arrays.sort(rates);
            return rates[ROUNDS / 2];
        }
    }
}
