package io.orbitkv.core.cost;

/** What the estimator knows about one key now. */
public sealed interface Lookup {

    /** At least the warm-up number of samples, none older than the idle expiry. */
    record Warm(Estimate estimate) implements Lookup {}

    /** Seen, but fewer samples than the warm-up needs. */
    record Cold(long samples) implements Lookup {}

    /** Never seen, expired or evicted. */
    record Missing() implements Lookup {}
}
