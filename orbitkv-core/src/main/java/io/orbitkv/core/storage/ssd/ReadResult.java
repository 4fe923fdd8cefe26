package io.orbitkv.core.storage.ssd;

import java.util.Objects;

/** Outcome of {@link SsdStore#read}. Only {@link Served} means the destination holds valid bytes. */
public sealed interface ReadResult {

    /**
     * The payload is in the destination's first {@code payloadBytes} bytes, verified against
     * the header and its CRC32C.
     *
     * @param bounced true when the bytes went through the store's aligned bounce buffer
     *                (destination not 4 KiB aligned or shorter than the padded payload)
     */
    record Served(int payloadBytes, boolean bounced) implements ReadResult {}

    /** The extent failed verification; it was dropped from the index. Destination contents are unspecified. */
    record Corrupt(ExtentDamage damage) implements ReadResult {
        public Corrupt {
            Objects.requireNonNull(damage, "damage");
        }
    }

    /** The I/O queue was full; nothing was read. */
    record Busy() implements ReadResult {}

    /** The pin had been released before the read ran; nothing was read. */
    record Released() implements ReadResult {}

    /** The operating system reported an I/O error; counted and logged. */
    record Failed(String error) implements ReadResult {
        public Failed {
            Objects.requireNonNull(error, "error");
        }
    }
}
