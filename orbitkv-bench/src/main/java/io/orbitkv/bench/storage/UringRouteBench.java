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

/**
 * The SSD store's io_uring read route against fio's io_uring engine: same file, same block
 * (the extent footprint), same queue depth, {@code --direct=1}.
 *
 * <p>Per block size: a store forced to {@link ReadPath#URING} (it refuses to open when io_uring
 * is unavailable, so the numbers can only be the route's) with one ring file of
 * {@code datasetBytes} filled with extents; per depth, paired rounds (order alternating) of
 * verified random reads through the route ({@link SsdLanes#readRound}: pin, two SQEs for header
 * and payload straight into an aligned destination, CRC32C, unpin) and fio
 * {@code --ioengine=io_uring --rw=randread --bs=<footprint>} on the same extent file. The ratio
 * is the median of the per-round ratios of extent bytes per second; target ≥ 0.95.
 *
 * <p>Thread model: single-threaded driver; lanes run on the route's completion owner.
 * Owns its store directory under the given directory and deletes it when done.
 *
 * <p>Design note: only fio's io_uring engine is the baseline here (the {@code ssd} benchmark
 * already compares the store with fio's best engine): this row answers whether the Java route
 * costs anything over the same kernel interface driven from C. Differences it measures: two
 * SQEs per extent where fio issues one, the CRC32C of the payload, and the completion hop to one
 * reaper thread.
 * Run: {@code java -jar orbitkv-bench.jar ssd-uring --dir=var/bench} (or {@code bin/bench-storage}).
 */
public final class UringRouteBench {

    /**
     * @param directory    parent of the store directory (must not be tmpfs: O_DIRECT is required)
     * @param blockSizes   payload sizes, bytes, multiples of 4096
     * @param depths       queue depths
     * @param datasetBytes size of the store's ring file
     * @param roundSeconds seconds per side per round
     * @param rounds       paired rounds per configuration
     */
    public record Options(Path directory, List<Integer> blockSizes, List<Integer> depths, long datasetBytes,
                          int roundSeconds, int rounds) {}

    private static final double TARGET = 0.95;
    private static final NamespaceDigest NAMESPACE = new NamespaceDigest(0x0B17B17B17L, 2, 3, 5);

    private UringRouteBench() {}

    public static List<BenchRow> run(Options o) throws IOException, InterruptedException {
        List<BenchRow> rows = new ArrayList<>();
        for (int blockBytes : o.blockSizes()) rows.addAll(runSize(o, blockBytes));
        return rows;
    }

    private static List<BenchRow> runSize(Options o, int blockBytes) throws IOException, InterruptedException {
        long footprint = ExtentLayout.footprintBytes(blockBytes);
        int extents = BenchSsdRing.extents(o.datasetBytes(), blockBytes);
        int maxDepth = o.depths().stream().mapToInt(Integer::intValue).max().orElseThrow();
        Path dir = o.directory().resolve("ssd-uring-" + (blockBytes >> 10) + "k");
        FileTrees.delete(dir);
        SsdConfig config = BenchSsdRing.config(dir, extents, blockBytes, maxDepth).withReadPath(ReadPath.URING)
                .withUringInflightReads(4 * maxDepth);
        List<BenchRow> rows = new ArrayList<>();
        try (Arena arena = Arena.ofShared();
             SsdStore store = SsdStore.open(config, new ResidencyStream(1024), new SimpleMeterRegistry())) {
            store.recover();
            if (store.ioMode() != IoMode.DIRECT) throw new IllegalStateException("store is not in O_DIRECT mode");
            if (store.readPath() != ReadPath.URING) throw new IllegalStateException("store is not on the uring route");
            MemorySegment[] buffers = BenchSsdRing.payloads(arena, blockBytes, maxDepth);
            StateKey[] keys = BenchSsdRing.fill(store, NAMESPACE, extents, buffers, blockBytes, maxDepth);
            Path file = BenchSsdRing.singleFile(dir);
            for (int depth : o.depths()) {
                Fio.Job job = new Fio.Job(file, 0, extents * footprint, footprint, depth, Fio.Pattern.RANDREAD,
                        o.roundSeconds());
                long nanos = TimeUnit.SECONDS.toNanos(o.roundSeconds());
                long[] seed = {depth * 7_000_003L};
                Throughput.Paired p = Throughput.pairedRounds(() -> {
                    try {
                        return SsdLanes.readRound(store, NAMESPACE, keys, buffers, depth, nanos, seed[0]++).opsPerSecond() * footprint;
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        throw new IllegalStateException(e);
                    }
                }, () -> fioRound(job), o.rounds());
                String name = "SSD uring route randread " + DramPutGetBench.size(blockBytes) + ", QD " + depth;
                System.err.printf("%s: route %.0f MB/s, fio io_uring %.0f MB/s, ratio %.3f (%d rounds of %d s)%n", name,
                        p.subjectRate() / 1e6, p.baselineRate() / 1e6, p.ratio(), p.rounds(), o.roundSeconds());
                rows.add(new BenchRow(name, BenchRow.fmt(p.subjectRate() / 1e6, 0) + " MB/s",
                        BenchRow.fmt(p.baselineRate() / 1e6, 0) + " MB/s (fio io_uring)", p.ratio(),
                        BenchRow.Target.atLeast(TARGET)));
            }
        } finally {
            FileTrees.delete(dir);
        }
        return rows;
    }

    private static double fioRound(Fio.Job job) {
        try {
            return switch (Fio.run(job, Fio.Engine.IO_URING)) {
                case Fio.Result.Measured(Fio.Engine e, double bps) -> bps;
                case Fio.Result.Unavailable(Fio.Engine e, String reason) ->
                        throw new IllegalStateException("fio io_uring cannot run here: " + reason);
            };
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
