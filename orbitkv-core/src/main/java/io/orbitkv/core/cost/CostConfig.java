package io.orbitkv.core.cost;

import java.time.Duration;
import java.util.Map;
import java.util.Objects;

/**
 * Switch and budgets of cost observation. Immutable, validated.
 *
 * @param observationsEnabled   the Manager's {@code costObservations} key (alias
 *                              {@code ORBITKV_COST_OBSERVATIONS=1}); when false no owner times
 *                              anything and no cost meter is registered
 * @param maxEntries            estimate entries kept at most (512); the least recently used goes first
 * @param warmSamples           successful samples before an entry is used (4)
 * @param idleExpiry            an entry with no sample for this long is stale and must warm up again (5 min)
 * @param ewmaWeight            weight of a new sample in the mean and error EWMAs, in (0, 1]
 * @param shadowMarginFraction  switching margin as a fraction of the current estimate (0.05)
 */
public record CostConfig(boolean observationsEnabled, int maxEntries, int warmSamples, Duration idleExpiry,
                         double ewmaWeight, double shadowMarginFraction) {

    /** The environment alias of the {@code costObservations} key: turns observations on when exactly {@code 1}. */
    public static final String OBSERVATIONS_ENV = "ORBITKV_COST_OBSERVATIONS";

    public CostConfig {
        Objects.requireNonNull(idleExpiry, "idleExpiry");
        if (maxEntries <= 0) throw new IllegalArgumentException("maxEntries must be positive: " + maxEntries);
        if (warmSamples <= 0) throw new IllegalArgumentException("warmSamples must be positive: " + warmSamples);
        if (idleExpiry.isNegative() || idleExpiry.isZero()) throw new IllegalArgumentException("idleExpiry: " + idleExpiry);
        if (!(ewmaWeight > 0 && ewmaWeight <= 1)) throw new IllegalArgumentException("ewmaWeight: " + ewmaWeight);
        if (!(shadowMarginFraction >= 0 && shadowMarginFraction < 1)) {
            throw new IllegalArgumentException("shadowMarginFraction: " + shadowMarginFraction);
        }
    }

    /**
     * The documented budgets: 512 entries, 4 warm-up samples, 5 idle minutes, EWMA weight 1/4
     * (a new sample moves the mean a quarter of the way: ~90 % of a step change shows after 8
     * samples), 5 % margin.
     */
    public static CostConfig defaults(boolean observationsEnabled) {
        return new CostConfig(observationsEnabled, 512, 4, Duration.ofMinutes(5), 0.25, 0.05);
    }

    /** Observations off. */
    public static CostConfig disabled() {
        return defaults(false);
    }

    /** Observations on when {@code env} holds {@value #OBSERVATIONS_ENV}{@code =1}. */
    public static CostConfig fromEnvironment(Map<String, String> env) {
        return defaults("1".equals(env.get(OBSERVATIONS_ENV)));
    }

    public long idleExpiryNanos() {
        return idleExpiry.toNanos();
    }
}
