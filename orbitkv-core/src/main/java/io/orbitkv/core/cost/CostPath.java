package io.orbitkv.core.cost;

/**
 * An executable transfer path whose cost is observed. A path is a mechanism, not a tier: the
 * same SSD extent can be read by {@link #SSD_POSITIONAL} or {@link #SSD_URING}.
 */
public enum CostPath {
    /** CPU copy between two DRAM segments (publish seal, lease copy-out). */
    DRAM_COPY,
    /** SSD extent read by a worker thread with positional {@code pread} (O_DIRECT). */
    SSD_POSITIONAL,
    /** SSD extent read through io_uring with one completion owner. */
    SSD_URING,
    /** Bytes fetched from a peer Manager. */
    PEER_FETCH,
    /** Copy of host bytes into the engine's memory for a restore. */
    RESTORE_COPY;

    /**
     * Paths that can execute the same work as this one over the same source, so that their
     * estimates are candidates for a shadow comparison. Only the two SSD routes share a source
     * today; a DRAM copy has one executor, so it has no alternative yet.
     */
    public boolean sameSourceAs(CostPath other) {
        return switch (this) {
            case SSD_POSITIONAL, SSD_URING -> other == SSD_POSITIONAL || other == SSD_URING;
            case DRAM_COPY, PEER_FETCH, RESTORE_COPY -> other == this;
        };
    }
}
