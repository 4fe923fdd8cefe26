package io.orbitkv.router;

/**
 * What the {@link Router} measured of the cluster's arrivals for one decision: how many requests it
 * expects to arrive while the shortest queue drains, counted from the route requests it saw in the
 * last {@code horizonSeconds} (the shortest queue's length), on the assumption that the recent rate
 * holds for as long again.
 *
 * @param horizonSeconds   the shortest queue at the decision (0: some worker is idle)
 * @param expectedArrivals requests (all workers together) expected in the next {@code horizonSeconds}
 */
public record Backlog(double horizonSeconds, double expectedArrivals) {

    /** No backlog: a worker is idle, or nothing has been measured. */
    public static final Backlog NONE = new Backlog(0, 0);

    public Backlog {
        if (!(horizonSeconds >= 0) || !Double.isFinite(horizonSeconds)) {
            throw new IllegalArgumentException("horizonSeconds must be finite and >= 0: " + horizonSeconds);
        }
        if (!(expectedArrivals >= 0) || !Double.isFinite(expectedArrivals)) {
            throw new IllegalArgumentException("expectedArrivals must be finite and >= 0: " + expectedArrivals);
        }
    }
}
