package io.orbitkv.bench;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.DoubleSupplier;
import java.util.function.LongSupplier;

/**
 * Paired throughput measurement: a subject and its baseline run in alternating rounds within one
 * process, and the reported ratio is the median of the per-round ratios.
 *
 * <p>Stateless; the suppliers run on the calling thread, one at a time.
 *
 * <p>Design note: these machines are noisy (2 shared cores), so absolute numbers drift by tens
 * of percent between runs. Alternating subject and baseline in short rounds and taking the
 * median per-round ratio cancels slow drift (frequency, neighbours) that a "baseline first, then
 * subject" run would fold into the ratio. The order flips every round (ABBA) so that neither side
 * always runs right after a warm-up of the other. {@link #pairedRounds} accepts whole rounds,
 * so an external baseline (a {@code fio} process) pairs with an in-process subject the same way.
 */
public final class Throughput {

    /** Result of a paired run: medians of each side and of the per-round ratio (subject / baseline). */
    public record Paired(double subjectRate, double baselineRate, double ratio, int rounds) {
        public Paired {
            if (rounds <= 0) throw new IllegalArgumentException("rounds must be positive: " + rounds);
        }
    }

    private Throughput() {}

    /**
     * Runs {@code rounds} rounds; in each, {@code opsPerRound} operations of the subject and of
     * the baseline (order alternated per round). Each supplier performs one operation and returns
     * the bytes it moved; rates are in GB/s (10^9 bytes per second).
     */
    public static Paired paired(LongSupplier subject, LongSupplier baseline, int warmupOps, int opsPerRound, int rounds) {
        for (int i = 0; i < warmupOps; i++) {
            subject.getAsLong();
            baseline.getAsLong();
        }
        return pairedRounds(() -> gbps(subject, opsPerRound), () -> gbps(baseline, opsPerRound), rounds);
    }

    /**
     * Runs {@code rounds} rounds of one subject round and one baseline round each, the order
     * flipping every round. Each supplier runs one whole round and returns its rate (any unit,
     * the same on both sides).
     */
    public static Paired pairedRounds(DoubleSupplier subjectRound, DoubleSupplier baselineRound, int rounds) {
        if (rounds <= 0) throw new IllegalArgumentException("rounds must be positive: " + rounds);
        double[] s = new double[rounds];
        double[] b = new double[rounds];
        double[] r = new double[rounds];
        for (int round = 0; round < rounds; round++) {
            if (round % 2 == 0) {
                s[round] = subjectRound.getAsDouble();
                b[round] = baselineRound.getAsDouble();
            } else {
                b[round] = baselineRound.getAsDouble();
                s[round] = subjectRound.getAsDouble();
            }
            r[round] = s[round] / b[round];
        }
        return new Paired(median(s), median(b), median(r), rounds);
    }

    /**
     * Like {@link #pairedRounds} with several baselines measured in every round (subject first
     * and baselines in order in even rounds, the reverse in odd rounds). Returns one
     * {@link Paired} per baseline, in the given order, all sharing the subject's samples; a
     * caller picks the best baseline by its median rate rather than by one lucky sample.
     */
    public static List<Paired> pairedRoundsAgainstEach(DoubleSupplier subjectRound, List<DoubleSupplier> baselineRounds,
                                                      int rounds) {
        if (rounds <= 0) throw new IllegalArgumentException("rounds must be positive: " + rounds);
        if (baselineRounds.isEmpty()) throw new IllegalArgumentException("no baseline");
        int n = baselineRounds.size();
        double[] s = new double[rounds];
        double[][] b = new double[n][rounds];
        for (int round = 0; round < rounds; round++) {
            boolean forward = round % 2 == 0;
            if (forward) s[round] = subjectRound.getAsDouble();
            for (int k = 0; k < n; k++) {
                int i = forward ? k : n - 1 - k;
                b[i][round] = baselineRounds.get(i).getAsDouble();
            }
            if (!forward) s[round] = subjectRound.getAsDouble();
        }
        List<Paired> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            double[] r = new double[rounds];
            for (int round = 0; round < rounds; round++) r[round] = s[round] / b[i][round];
            out.add(new Paired(median(s), median(b[i]), median(r), rounds));
        }
        return out;
    }

    /** GB/s (10^9 bytes per second) of {@code ops} operations. */
    public static double gbps(LongSupplier op, int ops) {
        long bytes = 0;
        long t0 = System.nanoTime();
        for (int i = 0; i < ops; i++) bytes += op.getAsLong();
        long ns = System.nanoTime() - t0;
        return bytes / (double) ns;
    }

    /** Median of a non-empty array (mean of the middle two for an even length); the input is not modified. */
    public static double median(double[] values) {
        if (values.length == 0) throw new IllegalArgumentException("median of nothing");
        double[] c = values.clone();
        Arrays.sort(c);
        int n = c.length;
        return n % 2 == 1 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
    }
}
