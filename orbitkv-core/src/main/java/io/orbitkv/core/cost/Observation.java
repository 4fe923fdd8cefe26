package io.orbitkv.core.cost;

import java.util.Objects;

/**
 * One executed operation as its owner saw it. The owner gives the complete-route key; the
 * observer derives the operation key from it ({@link CostKey#withKind}).
 *
 * @param key          key of the complete route (its {@code kind} must be {@link SampleKind#ROUTE})
 * @param terminal     how it ended; anything but success is counted and never trains
 * @param timeline     host-clock instants of its stages
 * @param logicalBytes state bytes the operation attempted to move (unpadded), or unknown
 * @param ioBytes      physical bytes the owner moved (padding and headers included), or unknown
 */
public record Observation(CostKey key, Terminal terminal, Timeline timeline, ByteCount logicalBytes,
                          ByteCount ioBytes) {
    public Observation {
        Objects.requireNonNull(key, "key");
        Objects.requireNonNull(terminal, "terminal");
        Objects.requireNonNull(timeline, "timeline");
        Objects.requireNonNull(logicalBytes, "logicalBytes");
        Objects.requireNonNull(ioBytes, "ioBytes");
        if (key.kind() != SampleKind.ROUTE) throw new IllegalArgumentException("observation key must be a ROUTE key: " + key);
    }
}
