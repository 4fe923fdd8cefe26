package io.orbitkv.core.storage.residency;

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
 * @param lengthBytes the page's payload length (a key's bytes are immutable, so it is the same on
 *                    every medium); 0 = unknown (events rebuilt from key lists, evidence from an
 *                    older source). The catalog carries it to requesters, which charge a peer
 *                    page its real staging size instead of the largest DRAM slot
 */
public record ResidencyEvent(long sequence, StateKey key, Medium medium, Kind kind, long generation, int lengthBytes) {

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
        if (lengthBytes < 0) throw new IllegalArgumentException("lengthBytes must be >= 0 (0 = unknown): " + lengthBytes);
    }

    /** An event whose page length is unknown (0). */
    public ResidencyEvent(long sequence, StateKey key, Medium medium, Kind kind, long generation) {
        this(sequence, key, medium, kind, generation, 0);
    }
}
