package io.orbitkv.bench.storage;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.bench.Throughput;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.core.storage.ssd.ExtentLayout;
import io.orbitkv.core.storage.ssd.IoMode;
import io.orbitkv.core.storage.ssd.ReadPath;
import io.orbitkv.core.storage.ssd.SsdConfig;
import io.orbitkv.core.storage.ssd.SsdStore;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;

import io.orbitkv.state.unix.FileTrees;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.DoubleSupplier;

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
 * the extents. Every round runs the store and fio with each usable engine (io_uring, libaio,
 * psync; depth = numjobs for psync), the order reversing every round; fio's best engine is the
 * one with the highest median rate, and the ratio is the median of the per-round ratios to it.
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
 * Run: {@code java -jar orbitkv-bench.jar ssd --dir=var/bench} (or {@code bin/bench-storage}).
 */
public final class SsdThroughputBench {

    /**
     * @param directory    parent of the store directories (must not be tmpfs: O_DIRECT is required)
     * @param blockSizes   payload sizes, bytes, multiples of 4096
     * @param depths       queue depths
     * @param datasetBytes size of each store's ring file
     * @param roundSeconds seconds per side per round
     * @param rounds       paired rounds per configuration
     * @param probeSeconds seconds of the availability (and warm-up) run of each fio engine
     * @param writes       whether to run the write comparison
     * @param readPath     the store's read route setting (AUTO: io_uring where available); the
     *                     route actually used is named in each read row
     */
    public record Options(Path directory, List<Integer> blockSizes, List<Integer> depths, long datasetBytes,
                          int roundSeconds, int rounds, int probeSeconds, boolean writes, ReadPath readPath) {}

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
        int extents = BenchSsdRing.extents(o.datasetBytes(), blockBytes);
        int maxDepth = o.depths().stream().mapToInt(Integer::intValue).max().orElseThrow();
        Path dir = o.directory().resolve("ssd-" + (blockBytes >> 10) + "k");
        FileTrees.delete(dir);
        SsdConfig config = BenchSsdRing.config(dir, extents, blockBytes, maxDepth).withReadPath(o.readPath());
        List<BenchRow> rows = new ArrayList<>();
        try (Arena arena = Arena.ofShared();
             SsdStore store = SsdStore.open(config, new ResidencyStream(1024), new SimpleMeterRegistry())) {
            store.recover();
            if (store.ioMode() != IoMode.DIRECT) throw new IllegalStateException("store is not in O_DIRECT mode");
            MemorySegment[] buffers = BenchSsdRing.payloads(arena, blockBytes, maxDepth);
            StateKey[] keys = BenchSsdRing.fill(store, NAMESPACE, extents, buffers, blockBytes, maxDepth);
            Path file = BenchSsdRing.singleFile(dir);
            for (int depth : o.depths()) {
                Fio.Job job = new Fio.Job(file, 0, extents * footprint, footprint, depth, Fio.Pattern.RANDREAD,
                        o.roundSeconds());
                long nanos = TimeUnit.SECONDS.toNanos(o.roundSeconds());
                long[] seed = {depth * 1_000_003L};
                rows.add(compare("SSD randread " + DramPutGetBench.size(blockBytes) + ", QD " + depth + ", "
                        + store.readPath().name().toLowerCase(java.util.Locale.ROOT) + " route", o, job,
                        () -> SsdLanes.readRound(store, NAMESPACE, keys, buffers, depth, nanos, seed[0]++).opsPerSecond()
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
            FileTrees.delete(dir);
        }
        return rows;
    }

    /** A store round: bytes per second of extent footprints. */
    private interface StoreRound {
        double bytesPerSecond() throws InterruptedException;
    }

    private static BenchRow compare(String name, Options o, Fio.Job job, StoreRound storeRound, double target)
            throws IOException {
        List<Fio.Engine> engines = availableEngines(job, o.probeSeconds());
        List<DoubleSupplier> fioRounds = engines.stream().<DoubleSupplier>map(engine -> () -> fioRound(job, engine))
                .toList();
        List<Throughput.Paired> perEngine = Throughput.pairedRoundsAgainstEach(() -> {
            try {
                return storeRound.bytesPerSecond();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException(e);
            }
        }, fioRounds, o.rounds());
        int best = 0;
        StringBuilder others = new StringBuilder();
        for (int i = 0; i < engines.size(); i++) {
            if (perEngine.get(i).baselineRate() > perEngine.get(best).baselineRate()) best = i;
        }
        for (int i = 0; i < engines.size(); i++) {
            if (i == best) continue;
            others.append(others.isEmpty() ? "; " : ", ").append(engines.get(i).fioName()).append(' ')
                    .append(BenchRow.fmt(perEngine.get(i).baselineRate() / 1e6, 0));
        }
        Throughput.Paired p = perEngine.get(best);
        System.err.printf("%s: store %.0f MB/s, fio %s %.0f MB/s%s, ratio %.3f (%d rounds of %d s)%n", name,
                p.subjectRate() / 1e6, engines.get(best).fioName(), p.baselineRate() / 1e6, others, p.ratio(),
                p.rounds(), o.roundSeconds());
        return new BenchRow(name, BenchRow.fmt(p.subjectRate() / 1e6, 0) + " MB/s",
                BenchRow.fmt(p.baselineRate() / 1e6, 0) + " MB/s (fio " + engines.get(best).fioName() + others + ")",
                p.ratio(), BenchRow.Target.atLeast(target));
    }

    /** Engines fio can run here, checked with a short run of {@code job}; fails if none can. */
    private static List<Fio.Engine> availableEngines(Fio.Job job, int seconds) throws IOException {
        Fio.Job probe = new Fio.Job(job.file(), job.offsetBytes(), job.sizeBytes(), job.blockBytes(), job.depth(),
                job.pattern(), seconds);
        List<Fio.Engine> usable = new ArrayList<>();
        StringBuilder refused = new StringBuilder();
        for (Fio.Engine engine : Fio.Engine.values()) {
            switch (Fio.run(probe, engine)) {
                case Fio.Result.Measured(Fio.Engine e, double bps) -> usable.add(e);
                case Fio.Result.Unavailable(Fio.Engine e, String reason) ->
                        refused.append(' ').append(e.fioName()).append(": ").append(reason);
            }
        }
        if (!refused.isEmpty()) System.err.println("fio engines unavailable:" + refused);
        if (usable.isEmpty()) throw new IllegalStateException("no fio engine could run " + Fio.describe(job));
        return usable;
    }

    private static double fioRound(Fio.Job job, Fio.Engine engine) {
        try {
            return switch (Fio.run(job, engine)) {
                case Fio.Result.Measured(Fio.Engine e, double bps) -> bps;
                case Fio.Result.Unavailable(Fio.Engine e, String reason) ->
                        throw new IllegalStateException("fio " + e.fioName() + " failed mid-run: " + reason);
            };
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
