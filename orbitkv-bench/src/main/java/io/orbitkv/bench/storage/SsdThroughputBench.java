package io.orbitkv.bench.storage;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.bench.Throughput;
import io.orbitkv.core.storage.ResidencyStream;
import io.orbitkv.core.storage.ssd.ExtentLayout;
import io.orbitkv.core.storage.ssd.IoMode;
import io.orbitkv.core.storage.ssd.NamespaceDigest;
import io.orbitkv.core.storage.ssd.SsdConfig;
import io.orbitkv.core.storage.ssd.SsdStore;
import io.orbitkv.state.StateKey;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;

/**
 * SSD store reads and writes against {@code fio} on the same file, block size, depth and
 * O_DIRECT.
 *
 * <p>Per block size: a store with one ring file of {@code datasetBytes} (rounded down to whole
 * extents) is filled with extents; then, per queue depth, verified random reads of those extents
 * (pin, O_DIRECT read of header and payload straight into an aligned destination, both CRC32C
 * checks, unpin) alternate in rounds with fio {@code --rw=randread} on the <em>same extent
 * file</em>, {@code --offset=0 --size=} the extents, {@code --bs=} the extent footprint (4 KiB
 * header + payload): each fio I/O covers exactly one extent, the bytes the store reads for it.
 * Then writes of fresh keys (ring wrapping over the filled file) alternate with fio
 * {@code --rw=write} over the same range. Reads run before writes, since fio's writes destroy
 * the extents. fio's engine is chosen per configuration by a short probe of io_uring, libaio
 * and psync (depth = numjobs for psync); the best one then runs the paired rounds.
 *
 * <p>Thread model: single-threaded driver; the store's workers run the lanes ({@link SsdLanes}).
 * Owns its store directories under the given directory and deletes them when done.
 *
 * <p>Design note: the same file rather than a twin file of equal size, so that both sides read
 * the same physical blocks (a virtual disk's host cache and thin provisioning make two files on
 * the same filesystem behave differently), and because the extent footprint is 4 KiB aligned, so
 * fio's bs-aligned random offsets land exactly on extent boundaries. The store does two I/Os per
 * extent (header, then payload, both needed to verify before serving) where fio does one, and
 * computes a CRC32C of the payload (~0.1 ms per 2 MiB at ~20 GB/s): that is its cost of safety,
 * and what the ratio measures. Ratios compare extents per second, i.e. footprint bytes per second.
 */
public final class SsdThroughputBench {

    /**
     * @param directory    parent of the store directories (must not be tmpfs: O_DIRECT is required)
     * @param blockSizes   payload sizes, bytes, multiples of 4096
     * @param depths       queue depths
     * @param datasetBytes size of each store's ring file
     * @param roundSeconds seconds per side per round
     * @param rounds       paired rounds per configuration
     * @param probeSeconds seconds per engine in fio's engine probe
     * @param writes       whether to run the write comparison
     */
    public record Options(Path directory, List<Integer> blockSizes, List<Integer> depths, long datasetBytes,
                          int roundSeconds, int rounds, int probeSeconds, boolean writes) {}

    private static final double READ_TARGET = 0.95;
    private static final double WRITE_TARGET = 0.9;
    private static final NamespaceDigest NAMESPACE = new NamespaceDigest(0x0B17B17B17L, 2, 3, 4);
    private static final long WRITE_KEY_BASE = 1L << 40;

    private SsdThroughputBench() {}

    public static List<BenchRow> run(Options o) throws IOException, InterruptedException {
        List<BenchRow> rows = new ArrayList<>();
        for (int blockBytes : o.blockSizes()) rows.addAll(runSize(o, blockBytes));
        return rows;
    }

    private static List<BenchRow> runSize(Options o, int blockBytes) throws IOException, InterruptedException {
        long footprint = ExtentLayout.footprintBytes(blockBytes);
        int extents = (int) (o.datasetBytes() / footprint);
        if (extents < 16) throw new IllegalArgumentException("dataset too small for " + blockBytes + " B blocks");
        int maxDepth = o.depths().stream().mapToInt(Integer::intValue).max().orElseThrow();
        Path dir = o.directory().resolve("ssd-" + (blockBytes >> 10) + "k");
        deleteTree(dir);
        SsdConfig config = SsdConfig.of(dir).withFiles(1, extents * footprint).withMaxPayloadBytes(blockBytes)
                .withIo(maxDepth, 4 * maxDepth).withBuffers(1 << 20, 8 << 20);
        List<BenchRow> rows = new ArrayList<>();
        try (Arena arena = Arena.ofShared();
             SsdStore store = SsdStore.open(config, new ResidencyStream(1024), new SimpleMeterRegistry())) {
            store.recover();
            if (store.ioMode() != IoMode.DIRECT) throw new IllegalStateException("store is not in O_DIRECT mode");
            long padded = ExtentLayout.paddedPayloadBytes(blockBytes);
            MemorySegment[] buffers = new MemorySegment[maxDepth];
            for (int i = 0; i < maxDepth; i++) {
                buffers[i] = arena.allocate(padded, ExtentLayout.BLOCK_BYTES);
                for (long b = 0; b < padded; b += 8) buffers[i].set(ValueLayout.JAVA_LONG, b, BenchKeys.mix(b + i));
            }
            StateKey[] keys = fill(store, extents, buffers, blockBytes, maxDepth);
            Path file = singleFile(dir);
            for (int depth : o.depths()) {
                Fio.Job job = new Fio.Job(file, 0, extents * footprint, footprint, depth, Fio.Pattern.RANDREAD,
                        o.roundSeconds());
                long nanos = TimeUnit.SECONDS.toNanos(o.roundSeconds());
                long[] seed = {depth * 1_000_003L};
                rows.add(compare("SSD randread " + DramPutGetBench.size(blockBytes) + ", QD " + depth, o, job,
                        () -> SsdLanes.readRound(store, keys, buffers, depth, nanos, seed[0]++).opsPerSecond()
                                * footprint, READ_TARGET));
            }
            if (o.writes()) {
                AtomicLong next = new AtomicLong(WRITE_KEY_BASE);
                for (int depth : o.depths()) {
                    Fio.Job job = new Fio.Job(file, 0, extents * footprint, footprint, depth, Fio.Pattern.WRITE,
                            o.roundSeconds());
                    long nanos = TimeUnit.SECONDS.toNanos(o.roundSeconds());
                    rows.add(compare("SSD write " + DramPutGetBench.size(blockBytes) + ", QD " + depth, o, job,
                            () -> SsdLanes.writeRound(store, NAMESPACE, BenchKeys::key, next, Long.MAX_VALUE,
                                    buffers, blockBytes, depth, nanos).opsPerSecond() * footprint, WRITE_TARGET));
                }
            }
        } finally {
            deleteTree(dir);
        }
        return rows;
    }

    /** A store round: bytes per second of extent footprints. */
    private interface StoreRound {
        double bytesPerSecond() throws InterruptedException;
    }

    private static BenchRow compare(String name, Options o, Fio.Job job, StoreRound storeRound, double target)
            throws IOException {
        Fio.Job probe = new Fio.Job(job.file(), job.offsetBytes(), job.sizeBytes(), job.blockBytes(), job.depth(),
                job.pattern(), o.probeSeconds());
        Fio.Engine best = null;
        double bestRate = 0;
        StringBuilder probed = new StringBuilder();
        for (Fio.Engine engine : Fio.Engine.values()) {
            switch (Fio.run(probe, engine)) {
                case Fio.Result.Measured(Fio.Engine e, double bps) -> {
                    probed.append(String.format(" %s=%.0f MB/s", e.fioName(), bps / 1e6));
                    if (bps > bestRate) {
                        best = e;
                        bestRate = bps;
                    }
                }
                case Fio.Result.Unavailable(Fio.Engine e, String reason) ->
                        probed.append(" ").append(e.fioName()).append("=unavailable(").append(reason).append(")");
            }
        }
        if (best == null) throw new IllegalStateException("no fio engine could run " + Fio.describe(job) + ":" + probed);
        Fio.Engine engine = best;
        Throughput.Paired p = Throughput.pairedRounds(() -> {
            try {
                return storeRound.bytesPerSecond();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException(e);
            }
        }, () -> {
            try {
                return switch (Fio.run(job, engine)) {
                    case Fio.Result.Measured(Fio.Engine e, double bps) -> bps;
                    case Fio.Result.Unavailable(Fio.Engine e, String reason) ->
                            throw new IllegalStateException("fio " + e.fioName() + " failed mid-run: " + reason);
                };
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }, o.rounds());
        System.err.printf("%s: probe%s; store %.0f MB/s, fio %s %.0f MB/s, ratio %.3f%n", name, probed,
                p.subjectRate() / 1e6, engine.fioName(), p.baselineRate() / 1e6, p.ratio());
        return new BenchRow(name, BenchRow.fmt(p.subjectRate() / 1e6, 0) + " MB/s",
                BenchRow.fmt(p.baselineRate() / 1e6, 0) + " MB/s (fio " + engine.fioName() + ")",
                p.ratio(), BenchRow.Target.atLeast(target));
    }

    /** Writes {@code extents} extents (the ring file exactly full) and returns their keys. */
    private static StateKey[] fill(SsdStore store, int extents, MemorySegment[] payloads, int blockBytes, int depth)
            throws InterruptedException {
        long t0 = System.nanoTime();
        AtomicLong next = new AtomicLong();
        StateKey[] keys = new StateKey[extents];
        for (int i = 0; i < extents; i++) keys[i] = BenchKeys.key(i);
        SsdLanes.writeRound(store, NAMESPACE, i -> keys[(int) i], next, extents, payloads, blockBytes, depth,
                Long.MAX_VALUE);
        if (store.size() != extents) throw new IllegalStateException("filled " + store.size() + " of " + extents);
        System.err.printf("filled %d extents of %d B in %.1f s%n", extents, blockBytes, (System.nanoTime() - t0) / 1e9);
        return keys;
    }

    private static Path singleFile(Path dir) throws IOException {
        try (Stream<Path> s = Files.list(dir)) {
            List<Path> files = s.filter(Files::isRegularFile).toList();
            if (files.size() != 1) throw new IllegalStateException("expected one ring file in " + dir + ": " + files);
            return files.getFirst();
        }
    }

    static void deleteTree(Path dir) throws IOException {
        if (!Files.exists(dir)) return;
        try (Stream<Path> s = Files.walk(dir)) {
            for (Path p : s.sorted(Comparator.reverseOrder()).toList()) Files.delete(p);
        }
    }
}
