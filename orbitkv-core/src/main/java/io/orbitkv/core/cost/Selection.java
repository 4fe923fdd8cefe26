package io.orbitkv.core.cost;

/** What {@link SelectionRule} decided: keep the default source (and why) or switch to another. */
public sealed interface Selection {

    /** Why the default source keeps serving. */
    enum KeepReason {
        /** Selection is off. */
        DISABLED,
        /** No alternative of equal coverage, same target, representation and shape. */
        NO_ALTERNATIVE,
        /** The default or every eligible alternative lacks a warm estimate. */
        NO_EVIDENCE,
        /** Every warm alternative is within the margin (or slower). */
        WITHIN_MARGIN,
        /** The estimator was busy; selection never waits. */
        CONTENDED
    }

    record Keep(KeepReason reason) implements Selection {}

    /**
     * Switch to {@code chosen}, whose pessimistic estimate beats the default's optimistic one
     * by more than the margin.
     */
    record Switch(SourceCandidate chosen, Estimate defaultEstimate, Estimate chosenEstimate) implements Selection {}
}
