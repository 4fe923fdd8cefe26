package io.orbitkv.router;

/**
 * The router's bounds and fallback timing.
 *
 * @param cost             the cost constants (see {@link CostModel})
 * @param maxBlocks        block bound of the {@link PrefixIndex}
 * @param maxChainBlocks   most blocks one route request may carry (the Manager's default
 *                         {@code maxPagesPerQuery}, 65,536: a longer chain could not be queried anyway)
 * @param repairBoundNanos how long a worker whose event sequence has a gap is scored by load
 *                         while a replay repairs it; past it, its index is cleared and rebuilt
 *                         from the live events
 * @param staleAfterNanos  a worker sent work that must publish blocks, and silent for this long,
 *                         is stale: scored by load until its next event batch
 * @param rateWeight       EWMA weight of a new prefill-rate measurement, in (0, 1]
 */
public record RouterSettings(CostModel cost, int maxBlocks, int maxChainBlocks, long repairBoundNanos,
                             long staleAfterNanos, double rateWeight) {

    public static final int DEFAULT_MAX_BLOCKS = 1_000_000;
    public static final int DEFAULT_MAX_CHAIN_BLOCKS = 65_536;
    /** Two seconds: a replay of the Manager's 10,000 kept batches takes well under one on loopback. */
    public static final long DEFAULT_REPAIR_BOUND_NANOS = 2_000_000_000L;
    /** Ten seconds: a Manager publishes within ~2 ms of a store; ten seconds is far past any prefill here. */
    public static final long DEFAULT_STALE_AFTER_NANOS = 10_000_000_000L;
    public static final double DEFAULT_RATE_WEIGHT = 0.2;

    public RouterSettings {
        java.util.Objects.requireNonNull(cost, "cost");
        if (maxBlocks < 1) throw new IllegalArgumentException("maxBlocks must be >= 1: " + maxBlocks);
        if (maxChainBlocks < 1) throw new IllegalArgumentException("maxChainBlocks must be >= 1: " + maxChainBlocks);
        if (repairBoundNanos < 0) throw new IllegalArgumentException("repairBoundNanos must be >= 0: " + repairBoundNanos);
        if (staleAfterNanos < 1) throw new IllegalArgumentException("staleAfterNanos must be >= 1: " + staleAfterNanos);
        if (!(rateWeight > 0 && rateWeight <= 1)) throw new IllegalArgumentException("rateWeight must be in (0, 1]: " + rateWeight);
    }

    /** The defaults above with {@code cost}. */
    public static RouterSettings defaults(CostModel cost) {
        return new RouterSettings(cost, DEFAULT_MAX_BLOCKS, DEFAULT_MAX_CHAIN_BLOCKS, DEFAULT_REPAIR_BOUND_NANOS,
                DEFAULT_STALE_AFTER_NANOS, DEFAULT_RATE_WEIGHT);
    }
}
