package io.orbitkv.core.storage;

import io.orbitkv.state.StateKey;

import java.util.Objects;

/**
 * One change of where a key is resident on this owner (this Manager).
 *
 * @param sequence    monotonically increasing per owner, starting at 1; gaps never occur
 * @param key         the page's state key
 * @param medium      where the change happened
 * @param kind        what happened
 * @param generation  the medium's generation of that image (SSD extent generation, DRAM image
 *                    id): lets a consumer tell a re-insert from a stale duplicate
 */
public record ResidencyEvent(long sequence, StateKey key, Medium medium, Kind kind, long generation) {

    /** Where a page is resident. */
    public enum Medium { DRAM, SSD }

    /** What happened to the key on that medium. */
    public enum Kind {
        /** DRAM insert or SSD commit: the image is now readable. */
        ADDED,
        /** DRAM eviction or SSD drop (overwrite, corruption, delete): no longer readable. */
        REMOVED
    }

    public ResidencyEvent {
        if (sequence <= 0) throw new IllegalArgumentException("sequence must be positive: " + sequence);
        Objects.requireNonNull(key, "key");
        Objects.requireNonNull(medium, "medium");
        Objects.requireNonNull(kind, "kind");
    }
}
