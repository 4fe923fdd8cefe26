package io.orbitkv.core.cost;

import java.util.Objects;

/**
 * One shadow verdict: the executed route's key, one alternative's key and the outcome, with
 * the two lookups it was based on (for logs and {@code /status}).
 */
public record ShadowComparison(CostKey executed, CostKey alternative, ShadowOutcome outcome, Lookup executedLookup,
                               Lookup alternativeLookup) {
    public ShadowComparison {
        Objects.requireNonNull(executed, "executed");
        Objects.requireNonNull(alternative, "alternative");
        Objects.requireNonNull(outcome, "outcome");
        Objects.requireNonNull(executedLookup, "executedLookup");
        Objects.requireNonNull(alternativeLookup, "alternativeLookup");
    }
}
