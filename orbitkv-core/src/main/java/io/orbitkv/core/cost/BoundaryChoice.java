package io.orbitkv.core.cost;

import java.util.Objects;

/**
 * The boundary {@link BoundaryRule} picked, and on what basis.
 *
 * @param chosen          the boundary to serve
 * @param basis           why
 * @param firstTokenNanos the estimated time to the first token for {@code chosen} (its
 *                        pessimistic bound); negative when no estimate was made
 */
public record BoundaryChoice(BoundaryCandidate chosen, Basis basis, double firstTokenNanos) {

    public enum Basis {
        /** One legal boundary only. */
        ONLY_CANDIDATE,
        /** The adapter gave no prefill rate (0 = unknown): the longest stays. */
        NO_PREFILL_RATE,
        /** Some candidate has no warm estimate: the longest stays. */
        NO_ESTIMATE,
        /** Estimates agree the longest boundary is fastest (or the others are within the margin). */
        LONGEST_BY_ESTIMATE,
        /** A shorter boundary reaches the first token sooner by more than the margin. */
        SHORTENED_BY_ESTIMATE
    }

    public BoundaryChoice {
        Objects.requireNonNull(chosen, "chosen");
        Objects.requireNonNull(basis, "basis");
    }
}
