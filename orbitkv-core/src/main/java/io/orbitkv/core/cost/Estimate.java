package io.orbitkv.core.cost;

/**
 * A warm estimate: EWMA of the successful samples and EWMA of their absolute deviation from the
 * running mean (an empirical margin, not a confidence interval).
 *
 * @param meanNanos  EWMA of the sample durations
 * @param errorNanos EWMA of |sample − mean before the sample|
 * @param samples    successful samples since the entry was (re)created
 * @param ageNanos   time since the last sample, at lookup
 */
public record Estimate(double meanNanos, double errorNanos, long samples, long ageNanos) {
    public Estimate {
        if (!(meanNanos >= 0) || !(errorNanos >= 0)) {
            throw new IllegalArgumentException("mean and error must be >= 0: " + meanNanos + ", " + errorNanos);
        }
    }
}
