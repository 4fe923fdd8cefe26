package io.orbitkv.core.storage.ssd;

import io.orbitkv.state.StateKey;

import java.util.Objects;

/** Outcome of {@link SsdStore#pin}: a {@link Pin} on the exact indexed generation, or a miss. */
public sealed interface PinResult permits Pin, PinResult.Miss {

    /** The key has no readable extent (never written, dropped, or being overwritten right now). */
    record Miss(StateKey key) implements PinResult {
        public Miss {
            Objects.requireNonNull(key, "key");
        }
    }
}
