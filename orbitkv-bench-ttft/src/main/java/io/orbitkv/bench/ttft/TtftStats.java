package io.orbitkv.bench.ttft;

import io.orbitkv.engine.HitSource;

import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The numbers the report prints, computed from samples: per-arm percentiles, the paired
 * miss-path overhead and the hit model.
 *
 * <p>Stateless functions over immutable lists. Percentiles are nearest-rank (p99 of 16 samples is
 * the largest), so no value is invented between two measurements.
 */
public final class TtftStats {

    private TtftStats() {
    }

    /** One arm of one engine. */
    record ArmSummary(String engine, Arm arm, int requests, double p50Ms, double p95Ms, double p99Ms,
                      double prefilledPerRequest, double restoredTokensPerRequest, double restoredBytesPerRequest,
                      Map<HitSource, Integer> sources) {
    }

    /**
     * Paired miss-path overhead: for each request the miss arm's TTFT over the cold arm's on the
     * same turn of the same session; the median of those ratios, minus one.
     */
    record MissOverhead(int pairs, double medianRatio, double p50Ratio, double p25Ratio, double p75Ratio) {
        double percent() {
            return (medianRatio - 1) * 100;
        }
    }

    /**
     * Hit model per full-prefix DRAM hit: {@code restoredBytes / copyBytesPerSecond + stepNanos};
     * {@code ratio} = measured TTFT / model.
     */
    record HitModel(int requests, double medianRestoredBytes, double medianModelMs, double medianTtftMs,
                    double p50Ratio, double p95Ratio) {
    }

    /**
     * The median of each step of the runners' {@link io.orbitkv.engine.TtftBreakdown} over one
     * arm's requests; {@code restMs} is the median of each request's TTFT minus its measured steps
     * (page keys, buffer setup, sampling), so the columns need not add up to {@code ttftMs}.
     */
    record Split(int requests, double lookupMs, double copyMs, double importMs, double releaseMs, double prefillMs,
                 double restMs, double ttftMs) {
    }

    /** Nearest-rank percentile {@code p} (0 < p <= 100) of {@code values}. */
    public static double percentile(double[] values, double p) {
        if (values.length == 0) throw new IllegalArgumentException("no values");
        if (!(p > 0 && p <= 100)) throw new IllegalArgumentException("percentile " + p);
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        int rank = (int) Math.ceil(p / 100 * sorted.length);
        return sorted[Math.max(1, rank) - 1];
    }

    static ArmSummary summary(String engine, Arm arm, List<Sample> samples) {
        List<Sample> mine = samples.stream().filter(s -> s.engine().equals(engine) && s.arm() == arm).toList();
        double[] ms = mine.stream().mapToDouble(Sample::ttftMillis).toArray();
        Map<HitSource, Integer> sources = new java.util.EnumMap<>(HitSource.class);
        for (Sample s : mine) sources.merge(s.source(), 1, Integer::sum);
        return new ArmSummary(engine, arm, mine.size(), percentile(ms, 50), percentile(ms, 95), percentile(ms, 99),
                mine.stream().mapToInt(Sample::prefilledTokens).average().orElse(0),
                mine.stream().mapToInt(Sample::restoredTokens).average().orElse(0),
                mine.stream().mapToLong(Sample::restoredBytes).average().orElse(0), sources);
    }

    static MissOverhead missOverhead(String engine, List<Sample> samples) {
        Map<Long, Sample> cold = new HashMap<>();
        for (Sample s : samples) if (s.engine().equals(engine) && s.arm() == Arm.COLD) cold.put(pairKey(s), s);
        List<Sample> miss = samples.stream().filter(s -> s.engine().equals(engine) && s.arm() == Arm.MISS).toList();
        double[] ratios = new double[miss.size()];
        for (int i = 0; i < ratios.length; i++) {
            Sample c = cold.get(pairKey(miss.get(i)));
            if (c == null) throw new IllegalArgumentException("a miss sample without its cold pair");
            ratios[i] = (double) miss.get(i).ttftNanos() / c.ttftNanos();
        }
        double p50Ratio = percentile(miss.stream().mapToDouble(Sample::ttftMillis).toArray(), 50)
                / percentile(cold.values().stream().mapToDouble(Sample::ttftMillis).toArray(), 50);
        return new MissOverhead(ratios.length, median(ratios), p50Ratio, percentile(ratios, 25), percentile(ratios, 75));
    }

    static HitModel hitModel(String engine, List<Sample> samples, double copyBytesPerSecond, long stepNanos) {
        List<Sample> full = samples.stream().filter(s -> s.engine().equals(engine) && s.arm() == Arm.DRAM_FULL).toList();
        double[] ratios = new double[full.size()];
        double[] models = new double[full.size()];
        for (int i = 0; i < ratios.length; i++) {
            models[i] = modelNanos(full.get(i).restoredBytes(), copyBytesPerSecond, stepNanos);
            ratios[i] = full.get(i).ttftNanos() / models[i];
        }
        return new HitModel(full.size(), median(full.stream().mapToDouble(Sample::restoredBytes).toArray()),
                median(models) / 1e6, median(full.stream().mapToDouble(Sample::ttftMillis).toArray()),
                percentile(ratios, 50), percentile(ratios, 95));
    }

    static Split split(String engine, Arm arm, List<Sample> samples) {
        List<Sample> mine = samples.stream().filter(s -> s.engine().equals(engine) && s.arm() == arm).toList();
        return new Split(mine.size(), medianMs(mine, s -> s.breakdown().lookupNanos()),
                medianMs(mine, s -> s.breakdown().copyNanos()), medianMs(mine, s -> s.breakdown().importNanos()),
                medianMs(mine, s -> s.breakdown().releaseNanos()), medianMs(mine, s -> s.breakdown().prefillNanos()),
                medianMs(mine, s -> s.ttftNanos() - s.breakdown().measuredNanos()), medianMs(mine, Sample::ttftNanos));
    }

    private static double medianMs(List<Sample> samples, java.util.function.ToLongFunction<Sample> nanos) {
        return median(samples.stream().mapToDouble(s -> nanos.applyAsLong(s) / 1e6).toArray());
    }

    /** restored bytes / copy bandwidth + one minimum compute step, in nanoseconds. */
    static double modelNanos(long restoredBytes, double copyBytesPerSecond, long stepNanos) {
        return restoredBytes / copyBytesPerSecond * 1e9 + stepNanos;
    }

    static double median(double[] values) {
        return percentile(values, 50);
    }

    private static long pairKey(Sample s) {
        return ((long) s.session() << 32) | s.turn();
    }
}
