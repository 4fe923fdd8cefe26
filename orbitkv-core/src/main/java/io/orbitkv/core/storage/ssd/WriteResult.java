package io.orbitkv.core.storage.ssd;

import io.orbitkv.state.StateKey;

import java.util.Objects;

/** Outcome of {@link SsdStore#write}. Only {@link Committed} means the extent is indexed. */
public sealed interface WriteResult {

    /** The extent is on disk and in the index (unless a newer generation of the key won meanwhile). */
    record Committed(StateKey key, long generation) implements WriteResult {
        public Committed {
            Objects.requireNonNull(key, "key");
            if (generation <= 0) throw new IllegalArgumentException("generation must be positive");
        }
    }

    /** The I/O queue was full; nothing was written. */
    record Busy() implements WriteResult {}

    /** The filesystem is full (a ring file could not be preallocated, or a write hit ENOSPC). */
    record NoSpace() implements WriteResult {}

    /** Every position within one lap of the ring was pinned past the bounded wait. */
    record RingFull() implements WriteResult {}

    /** The operating system reported another I/O error; counted and logged. */
    record Failed(String error) implements WriteResult {
        public Failed {
            Objects.requireNonNull(error, "error");
        }
    }
}
