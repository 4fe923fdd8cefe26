package io.orbitkv.bench.storage;

import io.orbitkv.core.storage.ssd.ExtentLayout;
import io.orbitkv.core.storage.ssd.SsdConfig;
import io.orbitkv.core.storage.ssd.SsdStore;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;

/**
 * The set-up the SSD benchmarks ({@link SsdThroughputBench}, {@link UringRouteBench}) share: one
 * ring file sized to a whole number of extents of one block size, per-lane payload buffers, and
 * a fill that leaves the ring exactly full, so fio and the store read the same file and bytes.
 *
 * <p>Stateless; each method borrows what it is given (the store, the arena) from the calling
 * benchmark thread, which owns them. Invariant: a filled ring holds extents {@code 0..n-1} under
 * {@link BenchKeys#key} and nothing else.
 *
 * <p>Design note: at least {@value #MIN_EXTENTS} extents so random reads at the deepest queue
 * (16 in the runs) do not keep hitting the same few; the I/O budgets are the benchmarks' (one
 * worker per queue slot, 4 queued per worker, 1 MiB / 8 MiB staging buffers).
 */
final class BenchSsdRing {

    /** Fewest extents a ring may hold. */
    static final int MIN_EXTENTS = 16;
    private static final int STAGING_BUFFER_BYTES = 1 << 20;
    private static final int STAGING_POOL_BYTES = 8 << 20;

    private BenchSsdRing() {}

    /** How many extents of {@code blockBytes} a ring of {@code datasetBytes} holds; fails below {@value #MIN_EXTENTS}. */
    static int extents(long datasetBytes, int blockBytes) {
        int extents = (int) (datasetBytes / ExtentLayout.footprintBytes(blockBytes));
        if (extents < MIN_EXTENTS) throw new IllegalArgumentException("dataset too small for " + blockBytes + " B blocks");
        return extents;
    }

    /** One ring file of exactly {@code extents} extents of {@code blockBytes} under {@code dir}, I/O sized for {@code maxDepth}. */
    static SsdConfig config(Path dir, int extents, int blockBytes, int maxDepth) {
        return SsdConfig.of(dir).withMaxPayloadBytes(blockBytes)
                .withFiles(1, extents * ExtentLayout.footprintBytes(blockBytes)).withIo(maxDepth, 4 * maxDepth)
                .withBuffers(STAGING_BUFFER_BYTES, STAGING_POOL_BYTES);
    }

    /** {@code lanes} block-aligned padded payloads of {@code blockBytes}, each filled with its own pattern. */
    static MemorySegment[] payloads(Arena arena, int blockBytes, int lanes) {
        long padded = ExtentLayout.paddedPayloadBytes(blockBytes);
        MemorySegment[] buffers = new MemorySegment[lanes];
        for (int i = 0; i < lanes; i++) {
            buffers[i] = arena.allocate(padded, ExtentLayout.BLOCK_BYTES);
            for (long b = 0; b < padded; b += 8) buffers[i].set(ValueLayout.JAVA_LONG, b, BenchKeys.mix(b + i));
        }
        return buffers;
    }

    /** Writes extents {@code 0..extents-1} (the ring exactly full) at queue depth {@code depth}; returns their keys. */
    static StateKey[] fill(SsdStore store, NamespaceDigest namespace, int extents, MemorySegment[] payloads,
                           int blockBytes, int depth) throws InterruptedException {
        long t0 = System.nanoTime();
        StateKey[] keys = new StateKey[extents];
        for (int i = 0; i < extents; i++) keys[i] = BenchKeys.key(i);
        SsdLanes.writeRound(store, namespace, i -> keys[(int) i], new AtomicLong(), extents, payloads, blockBytes, depth,
                Long.MAX_VALUE);
        if (store.size() != extents) throw new IllegalStateException("filled " + store.size() + " of " + extents);
        System.err.printf("filled %d extents of %d B in %.1f s%n", extents, blockBytes, (System.nanoTime() - t0) / 1e9);
        return keys;
    }

    /** The store's one ring file under {@code dir} (what fio reads); fails unless there is exactly one. */
    static Path singleFile(Path dir) throws IOException {
        try (Stream<Path> s = Files.list(dir)) {
            List<Path> files = s.filter(Files::isRegularFile).toList();
            if (files.size() != 1) throw new IllegalStateException("expected one ring file in " + dir + ": " + files);
            return files.getFirst();
        }
    }
}
