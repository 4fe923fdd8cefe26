package io.orbitkv.core.cost;

import java.util.Objects;

/**
 * One legal boundary the planner could serve, with the estimate of the time until its state is
 * ready on its route.
 *
 * @param boundaryTokens tokens the engine will not recompute when this boundary is served
 * @param medium         the slowest medium its pages come from (DRAM when all are resident)
 * @param stateReady     the estimator's view of the complete route that makes the state ready
 *                       (a resident DRAM boundary with nothing to transfer passes a warm zero)
 */
public record BoundaryCandidate(long boundaryTokens, SourceMedium medium, Lookup stateReady) {
    public BoundaryCandidate {
        Objects.requireNonNull(medium, "medium");
        Objects.requireNonNull(stateReady, "stateReady");
        if (boundaryTokens <= 0) throw new IllegalArgumentException("boundaryTokens must be positive: " + boundaryTokens);
    }

    /** A boundary whose pages are all resident: ready as soon as admitted. */
    public static BoundaryCandidate resident(long boundaryTokens) {
        return new BoundaryCandidate(boundaryTokens, SourceMedium.DRAM, new Lookup.Warm(new Estimate(0, 0, Long.MAX_VALUE, 0)));
    }
}
