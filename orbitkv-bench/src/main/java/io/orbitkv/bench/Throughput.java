package io.orbitkv.bench;

import java.util.Arrays;
import java.util.function.LongSupplier;

/**
 * Paired throughput measurement: a subject and its baseline run in alternating rounds within one
 * process, and the reported ratio is the median of the per-round ratios.
 *
 * <p>Design note: these machines are noisy (2 shared cores), so absolute numbers drift by tens
 * of percent between runs. Alternating subject and baseline in short rounds and taking the
 * median per-round ratio cancels slow drift (frequency, neighbours) that a "baseline first, then
 * subject" run would fold into the ratio.
 */
public final class Throughput {

    /** Result of a paired run: medians of each side and of the per-round ratio. */
    public record Paired(double subjectGbps, double baselineGbps, double ratio, int rounds) {
        public String row(String name) {
            return String.format("| %s | %.2f | %.2f | %.3f |", name, subjectGbps, baselineGbps, ratio);
        }
    }

    private Throughput() {}

    /**
     * Runs {@code rounds} rounds; in each, {@code opsPerRound} operations of the subject and of
     * the baseline (order alternated per round). Each supplier performs one operation and returns
     * the bytes it moved.
     */
    public static Paired paired(LongSupplier subject, LongSupplier baseline, int warmupOps, int opsPerRound, int rounds) {
        for (int i = 0; i < warmupOps; i++) {
            subject.getAsLong();
            baseline.getAsLong();
        }
        double[] s = new double[rounds];
        double[] b = new double[rounds];
        double[] r = new double[rounds];
        for (int round = 0; round < rounds; round++) {
            if (round % 2 == 0) {
                s[round] = gbps(subject, opsPerRound);
                b[round] = gbps(baseline, opsPerRound);
            } else {
                b[round] = gbps(baseline, opsPerRound);
                s[round] = gbps(subject, opsPerRound);
            }
            r[round] = s[round] / b[round];
        }
        return new Paired(median(s), median(b), median(r), rounds);
    }

    /** GB/s (10^9 bytes per second) of {@code ops} operations. */
    public static double gbps(LongSupplier op, int ops) {
        long bytes = 0;
        long t0 = System.nanoTime();
        for (int i = 0; i < ops; i++) bytes += op.getAsLong();
        long ns = System.nanoTime() - t0;
        return bytes / (double) ns;
    }

    public static double median(double[] values) {
        double[] c = values.clone();
        Arrays.sort(c);
        int n = c.length;
        return n % 2 == 1 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
    }
}
