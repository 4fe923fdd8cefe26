package io.orbitkv.core.query;

import java.util.concurrent.TimeUnit;

/**
 * The bounds of preparation (PREPARE, protocol §5.11): the speculation budget, separate from the
 * QUERY staging budget, and the timing rules. Immutable; validated on construction.
 *
 * @param inFlightBytes        bytes all prepares of the Manager have admitted and not yet landed
 *                             (queued or being read), 4 KiB-padded payload bytes
 * @param heldBytes            bytes all prepares of the Manager hold in DRAM or will hold once landed
 * @param sessionInFlightBytes the same as {@code inFlightBytes}, per connection
 * @param sessionHeldBytes     the same as {@code heldBytes}, per connection
 * @param maxPrepares          live prepare operations over all connections (the Manager's prepare table)
 * @param stagesPerPrepare     reads one prepare has submitted at once
 * @param marginNanos          staging starts this much before {@code first use − estimated staging time}
 * @param graceNanos           prepared pages not consumed by {@code first use + grace} are released (expired)
 * @param maxLeadNanos         the furthest ahead a first use may lie; a later one is taken as this
 * @param coldBytesPerSecond   the staging rate assumed while the SSD read estimate is cold (and for peers)
 */
public record SpeculationBounds(long inFlightBytes, long heldBytes, long sessionInFlightBytes, long sessionHeldBytes,
                                int maxPrepares, int stagesPerPrepare, long marginNanos, long graceNanos,
                                long maxLeadNanos, long coldBytesPerSecond) {

    /**
     * Defaults: 128 MiB in flight and 512 MiB held per Manager, a quarter of each per connection,
     * 4,096 prepares, 8 reads each, a 20 ms margin, a 2 s grace, a 60 s lead, 500 MB/s when cold.
     */
    public static final SpeculationBounds DEFAULTS = new SpeculationBounds(128L << 20, 512L << 20, 32L << 20,
            128L << 20, 4096, 8, TimeUnit.MILLISECONDS.toNanos(20), TimeUnit.SECONDS.toNanos(2),
            TimeUnit.SECONDS.toNanos(60), 500_000_000L);

    public SpeculationBounds {
        if (inFlightBytes < 1 || heldBytes < 1 || sessionInFlightBytes < 1 || sessionHeldBytes < 1) {
            throw new IllegalArgumentException("speculation budgets must be >= 1 byte");
        }
        if (maxPrepares < 1 || stagesPerPrepare < 1) {
            throw new IllegalArgumentException("maxPrepares and stagesPerPrepare must be >= 1");
        }
        if (marginNanos < 0 || graceNanos < 0 || maxLeadNanos < 0 || coldBytesPerSecond < 1) {
            throw new IllegalArgumentException("margin, grace and lead must be >= 0, the cold rate >= 1");
        }
    }

    /** These bounds with the four budgets replaced. */
    public SpeculationBounds withBudgets(long inFlight, long held, long sessionInFlight, long sessionHeld) {
        return new SpeculationBounds(inFlight, held, sessionInFlight, sessionHeld, maxPrepares, stagesPerPrepare,
                marginNanos, graceNanos, maxLeadNanos, coldBytesPerSecond);
    }

    /**
     * These bounds with the held budgets at most {@code bytes} (at least 1): the Manager keeps
     * prepared pages to a share of its DRAM tier, whatever was configured.
     */
    public SpeculationBounds withHeldAtMost(long bytes) {
        long cap = Math.max(1, bytes);
        return withBudgets(inFlightBytes, Math.min(heldBytes, cap), sessionInFlightBytes, Math.min(sessionHeldBytes, cap));
    }

    /** These bounds with the timing rules replaced. */
    public SpeculationBounds withTiming(long margin, long grace, long maxLead) {
        return new SpeculationBounds(inFlightBytes, heldBytes, sessionInFlightBytes, sessionHeldBytes, maxPrepares,
                stagesPerPrepare, margin, grace, maxLead, coldBytesPerSecond);
    }
}
