package io.orbitkv.bench.storage;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.cost.CostConfig;
import io.orbitkv.core.cost.CostObserver;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.core.storage.ssd.ExtentLayout;
import io.orbitkv.core.storage.ssd.IoMode;
import io.orbitkv.core.storage.ssd.Pin;
import io.orbitkv.core.storage.ssd.ReadPath;
import io.orbitkv.core.storage.ssd.ReadResult;
import io.orbitkv.core.storage.ssd.SsdConfig;
import io.orbitkv.core.storage.ssd.SsdStore;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.unix.FileTrees;
import org.HdrHistogram.Histogram;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The observation overhead gate: the same workload with cost observations on
 * and off, in paired rounds whose order alternates; throughput and p50 latency must differ by
 * at most 2 %.
 *
 * <p>Workload: verified random reads at queue depth 1 of one SSD extent file on the positional
 * route, issued by one thread that waits for each read (so p50 is the per-read latency the
 * observation adds to). Two stores are opened over the same directory after it is written: one
 * with {@link CostObserver#disabled()}, one with observations on; each round reads the same key
 * sequence (same seed) from one of them.
 *
 * <p>Design note: QD 1 and small (64 KiB) extents make the per-read fixed cost, which is what
 * observation adds (four {@code nanoTime} reads, two estimator updates under {@code tryLock},
 * a shadow lookup and meter updates, ~1–2 µs), the largest possible share of a read; larger
 * extents or deeper queues would hide it further.
 *
 * <pre>java --enable-native-access=ALL-UNNAMED -jar orbitkv-bench.jar cost-overhead --dir=var/bench</pre>
 */
public final class CostOverheadBench {

    /**
     * @param buffered allow buffered I/O (a tmpfs directory: reads come from the page cache, so
     *                 the workload is CPU-bound and free of device noise)
     */
    public record Options(Path directory, int blockBytes, int extents, int roundSeconds, int rounds, boolean buffered) {}

    private static final double TOLERANCE = 0.02;
    private static final NamespaceDigest NAMESPACE = new NamespaceDigest(0xC0575L, 2, 3, 5);

    private record Round(double opsPerSecond, long p50Nanos) {}

    private CostOverheadBench() {}

    public static List<BenchRow> run(Options o) throws IOException, InterruptedException {
        Path dir = o.directory().resolve("cost-overhead");
        FileTrees.delete(dir);
        long footprint = ExtentLayout.footprintBytes(o.blockBytes());
        SsdConfig config = SsdConfig.of(dir).withFiles(1, o.extents() * footprint).withMaxPayloadBytes(o.blockBytes())
                .withIo(1, 16).withBuffers(1 << 20, 4 << 20).withReadPath(ReadPath.POSITIONAL)
                .withBufferedFallback(o.buffered());
        StateKey[] keys = new StateKey[o.extents()];
        for (int i = 0; i < keys.length; i++) keys[i] = BenchKeys.key(i);
        try (Arena arena = Arena.ofShared()) {
            MemorySegment buffer = arena.allocate(ExtentLayout.paddedPayloadBytes(o.blockBytes()), ExtentLayout.BLOCK_BYTES);
            for (long b = 0; b + 8 <= buffer.byteSize(); b += 8) buffer.set(ValueLayout.JAVA_LONG, b, BenchKeys.mix(b));
            try (SsdStore off = SsdStore.open(config, new ResidencyStream(1024), new SimpleMeterRegistry())) {
                off.recover();
                if (!o.buffered() && off.ioMode() != IoMode.DIRECT) {
                    throw new IllegalStateException("store is not in O_DIRECT mode");
                }
                SsdLanes.writeRound(off, NAMESPACE, i -> keys[(int) i], new AtomicLong(), keys.length,
                        new MemorySegment[] {buffer}, o.blockBytes(), 1, Long.MAX_VALUE);
            }
            CostObserver observer = CostObserver.create(CostConfig.defaults(true), new SimpleMeterRegistry(),
                    System::nanoTime);
            try (SsdStore off = SsdStore.open(config, new ResidencyStream(1024), new SimpleMeterRegistry());
                 SsdStore on = SsdStore.open(config, new ResidencyStream(1024), new SimpleMeterRegistry(), observer)) {
                off.recover();
                on.recover();
                long nanos = TimeUnit.SECONDS.toNanos(o.roundSeconds());
                round(off, keys, buffer, nanos / 4, 1); // warm-up of both code paths
                round(on, keys, buffer, nanos / 4, 1);
                double[] opsRatio = new double[o.rounds()];
                double[] p50Ratio = new double[o.rounds()];
                double[] onOps = new double[o.rounds()];
                double[] offOps = new double[o.rounds()];
                double[] onP50 = new double[o.rounds()];
                double[] offP50 = new double[o.rounds()];
                for (int r = 0; r < o.rounds(); r++) {
                    long seed = 1_000_003L * r;
                    Round a;
                    Round b;
                    if (r % 2 == 0) {
                        a = round(on, keys, buffer, nanos, seed);
                        b = round(off, keys, buffer, nanos, seed);
                    } else {
                        b = round(off, keys, buffer, nanos, seed);
                        a = round(on, keys, buffer, nanos, seed);
                    }
                    onOps[r] = a.opsPerSecond();
                    offOps[r] = b.opsPerSecond();
                    onP50[r] = a.p50Nanos();
                    offP50[r] = b.p50Nanos();
                    opsRatio[r] = a.opsPerSecond() / b.opsPerSecond();
                    p50Ratio[r] = (double) a.p50Nanos() / b.p50Nanos();
                    System.err.printf("round %d: on %.0f ops/s p50 %d ns, off %.0f ops/s p50 %d ns%n", r,
                            a.opsPerSecond(), a.p50Nanos(), b.opsPerSecond(), b.p50Nanos());
                }
                if (observer.status().trained() == 0) throw new IllegalStateException("observations did not train");
                double throughputRatio = median(opsRatio);
                double latencyRatio = median(p50Ratio);
                String name = "cost observations on/off, SSD randread " + DramPutGetBench.size(o.blockBytes()) + " QD 1"
                        + (o.buffered() ? " (page cache)" : " (O_DIRECT)");
                List<BenchRow> rows = new ArrayList<>();
                rows.add(new BenchRow(name + ", throughput", BenchRow.fmt(median(onOps), 0) + " ops/s",
                        BenchRow.fmt(median(offOps), 0) + " ops/s (off)", Math.abs(1 - throughputRatio),
                        BenchRow.Target.atMost(TOLERANCE, "")));
                rows.add(new BenchRow(name + ", p50", BenchRow.fmt(median(onP50) / 1e3, 1) + " µs",
                        BenchRow.fmt(median(offP50) / 1e3, 1) + " µs (off)", Math.abs(1 - latencyRatio),
                        BenchRow.Target.atMost(TOLERANCE, "")));
                System.err.printf("%s: throughput ratio %.4f, p50 ratio %.4f (%d rounds of %d s)%n", name,
                        throughputRatio, latencyRatio, o.rounds(), o.roundSeconds());
                return rows;
            }
        } finally {
            FileTrees.delete(dir);
        }
    }

    /** Reads random keys (fixed seed) one at a time for {@code nanos}; ops/s and p50 latency. */
    private static Round round(SsdStore store, StateKey[] keys, MemorySegment buffer, long nanos, long seed) {
        Histogram h = new Histogram(TimeUnit.SECONDS.toNanos(10), 3);
        SplittableRandom random = new SplittableRandom(seed);
        long start = System.nanoTime();
        long deadline = start + nanos;
        long ops = 0;
        long now = start;
        while (now < deadline) {
            if (!(store.pin(keys[random.nextInt(keys.length)], NAMESPACE) instanceof Pin pin)) {
                throw new IllegalStateException("key not indexed");
            }
            try {
                ReadResult r = store.read(pin, buffer).join();
                if (!(r instanceof ReadResult.Served)) throw new IllegalStateException("read failed: " + r);
            } finally {
                store.unpin(pin);
            }
            long end = System.nanoTime();
            h.recordValue(end - now);
            now = end;
            ops++;
        }
        return new Round(ops * 1e9 / (now - start), h.getValueAtPercentile(50));
    }

    private static double median(double[] values) {
        double[] v = values.clone();
        Arrays.sort(v);
        return v.length % 2 == 1 ? v[v.length / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
    }
}
