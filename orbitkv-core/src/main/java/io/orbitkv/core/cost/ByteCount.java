package io.orbitkv.core.cost;

/** A byte count an owner either knows or does not; unknown is never read as zero. */
public sealed interface ByteCount {

    record Known(long bytes) implements ByteCount {
        public Known {
            if (bytes < 0) throw new IllegalArgumentException("bytes must be >= 0: " + bytes);
        }
    }

    record Unknown() implements ByteCount {}

    static ByteCount known(long bytes) {
        return new Known(bytes);
    }

    static ByteCount unknown() {
        return new Unknown();
    }
}
