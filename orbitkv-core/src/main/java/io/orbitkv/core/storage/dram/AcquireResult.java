package io.orbitkv.core.storage.dram;

import io.orbitkv.state.StateKey;

import java.util.Objects;

/** Outcome of {@link DramTier#acquire}: a lease pinning the resident image, or a miss. */
public sealed interface AcquireResult permits Lease, AcquireResult.Miss {

    /** {@code key} has no resident image (never committed, evicted, or evicted while acquiring). */
    record Miss(StateKey key) implements AcquireResult {
        public Miss {
            Objects.requireNonNull(key, "key");
        }
    }
}
