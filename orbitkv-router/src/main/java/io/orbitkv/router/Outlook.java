package io.orbitkv.router;

/**
 * What the {@link Router} measured of the cluster for one decision, beyond the candidates' own
 * terms: how many requests it expects to arrive before the backlog it sees has drained, and what a
 * block held in a host's memory has been worth so far.
 *
 * @param horizonSeconds       how long the backlog is expected to last: the shortest queue over
 *                             (1 − the cluster's measured utilization), at most the time measured
 *                             (0: some worker is idle)
 * @param expectedArrivals     requests (all workers together) expected in the next {@code horizonSeconds},
 *                             from the rate of the route requests seen in the last {@code horizonSeconds}
 * @param reuseSecondsPerBlock recompute seconds one block stored in a host's memory has saved on
 *                             average: blocks served without recompute over blocks stored, times one
 *                             block's prefill (0 before anything was stored)
 */
public record Outlook(double horizonSeconds, double expectedArrivals, double reuseSecondsPerBlock) {

    /** Nothing measured: no backlog, no reuse. */
    public static final Outlook NONE = new Outlook(0, 0, 0);

    public Outlook {
        nonNegative("horizonSeconds", horizonSeconds);
        nonNegative("expectedArrivals", expectedArrivals);
        nonNegative("reuseSecondsPerBlock", reuseSecondsPerBlock);
    }

    /** A backlog alone, no reuse measured. */
    public Outlook(double horizonSeconds, double expectedArrivals) {
        this(horizonSeconds, expectedArrivals, 0);
    }

    private static void nonNegative(String name, double v) {
        if (!(v >= 0) || !Double.isFinite(v)) throw new IllegalArgumentException(name + " must be finite and >= 0: " + v);
    }
}
