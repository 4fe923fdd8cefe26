package io.orbitkv.core.cost;

/**
 * Size class of one transfer: log2 buckets of its bytes and of its fragment count. Two
 * transfers of the same shape are assumed to cost alike; different shapes never compare.
 *
 * @param bytesLog2     {@code floor(log2(bytes))}, 0..62
 * @param fragmentsLog2 {@code floor(log2(fragments))}, 0..30
 */
public record Shape(int bytesLog2, int fragmentsLog2) {
    public Shape {
        if (bytesLog2 < 0 || bytesLog2 > 62) throw new IllegalArgumentException("bytesLog2: " + bytesLog2);
        if (fragmentsLog2 < 0 || fragmentsLog2 > 30) throw new IllegalArgumentException("fragmentsLog2: " + fragmentsLog2);
    }

    /** Shape of a transfer of {@code bytes} (> 0) in {@code fragments} (> 0) pieces. */
    public static Shape of(long bytes, int fragments) {
        if (bytes <= 0) throw new IllegalArgumentException("bytes must be known and positive: " + bytes);
        if (fragments <= 0) throw new IllegalArgumentException("fragments must be positive: " + fragments);
        return new Shape(63 - Long.numberOfLeadingZeros(bytes), 31 - Integer.numberOfLeadingZeros(fragments));
    }
}
