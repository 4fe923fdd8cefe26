package io.orbitkv.router;

/** What {@link Router#onBatch} did with one event batch. */
public enum BatchOutcome {
    /** Applied in sequence. */
    APPLIED,
    /** Sequence 0 after a later one: a new publisher run; the worker's index was cleared, then the batch applied. */
    RESTARTED,
    /** Already applied (a replay overlapping the live stream); ignored. */
    DUPLICATE,
    /**
     * Batches are missing before this one: the batch is not applied, the worker is scored by load
     * and the caller should ask the publisher for a replay from {@link Router#nextSequence}.
     */
    GAP,
    /** Out of order while a replay is repairing an earlier gap; ignored (the replay brings it). */
    IGNORED
}
