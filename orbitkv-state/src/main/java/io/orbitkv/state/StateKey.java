package io.orbitkv.state;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.HexFormat;

/**
 * A 32-byte identity of one immutable page of KV state inside one namespace.
 *
 * <p>Immutable and thread-safe. The 32 bytes are held as four big-endian longs rather than a
 * {@code byte[]}: a key is 48 bytes on a compressed-oops heap instead of 64 (array header plus
 * padding), which matters at millions of resident pages, and equality is four comparisons.
 *
 * <p>Derivation (namespace digest, group id, block hash) lives in {@link StateKeys}; this class
 * is only the value.
 */
public final class StateKey implements Comparable<StateKey> {

    /** Size of a key in bytes. */
    public static final int BYTES = 32;

    private static final ValueLayout.OfLong BE_LONG =
            ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    private final long w0;
    private final long w1;
    private final long w2;
    private final long w3;

    private StateKey(long w0, long w1, long w2, long w3) {
        this.w0 = w0;
        this.w1 = w1;
        this.w2 = w2;
        this.w3 = w3;
    }

    /**
     * Builds a key from its four big-endian 64-bit words ({@link #word}), for holders that store the
     * words inline instead of a reference to a key.
     */
    public static StateKey ofWords(long w0, long w1, long w2, long w3) {
        return new StateKey(w0, w1, w2, w3);
    }

    /** Builds a key from exactly {@value #BYTES} bytes; the array is not retained. */
    public static StateKey ofBytes(byte[] bytes) {
        if (bytes.length != BYTES) {
            throw new IllegalArgumentException("a StateKey is 32 bytes, got " + bytes.length);
        }
        return read(MemorySegment.ofArray(bytes), 0);
    }

    /** Parses 64 hex digits (either case). */
    public static StateKey ofHex(String hex) {
        if (hex.length() != 2 * BYTES) {
            throw new IllegalArgumentException("a StateKey is 64 hex digits, got " + hex.length());
        }
        return ofBytes(HexFormat.of().parseHex(hex));
    }

    /** Reads a key stored in its canonical (big-endian) byte order at {@code offset}. */
    public static StateKey read(MemorySegment segment, long offset) {
        return new StateKey(
                segment.get(BE_LONG, offset),
                segment.get(BE_LONG, offset + 8),
                segment.get(BE_LONG, offset + 16),
                segment.get(BE_LONG, offset + 24));
    }

    /** Writes the 32 canonical bytes at {@code offset}. */
    public void write(MemorySegment segment, long offset) {
        segment.set(BE_LONG, offset, w0);
        segment.set(BE_LONG, offset + 8, w1);
        segment.set(BE_LONG, offset + 16, w2);
        segment.set(BE_LONG, offset + 24, w3);
    }

    /** A fresh copy of the 32 canonical bytes. */
    public byte[] toBytes() {
        byte[] out = new byte[BYTES];
        write(MemorySegment.ofArray(out), 0);
        return out;
    }

    /** Lower-case hex, 64 digits. */
    public String toHex() {
        return HexFormat.of().formatHex(toBytes());
    }

    /** Bytes {@code 8 * index} to {@code 8 * index + 7} as a big-endian long; {@code index} is 0..3. */
    public long word(int index) {
        return switch (index) {
            case 0 -> w0;
            case 1 -> w1;
            case 2 -> w2;
            case 3 -> w3;
            default -> throw new IndexOutOfBoundsException("a StateKey has words 0..3, not " + index);
        };
    }

    /** The first 8 bytes as a long: uniformly distributed, usable for sharding and hashing. */
    public long prefix64() {
        return w0;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof StateKey k && k.w0 == w0 && k.w1 == w1 && k.w2 == w2 && k.w3 == w3;
    }

    @Override
    public int hashCode() {
        // SHA-256 output is uniform: any 32 bits are a good hash.
        return (int) (w0 ^ (w0 >>> 32));
    }

    @Override
    public int compareTo(StateKey o) {
        int c = Long.compareUnsigned(w0, o.w0);
        if (c == 0) c = Long.compareUnsigned(w1, o.w1);
        if (c == 0) c = Long.compareUnsigned(w2, o.w2);
        if (c == 0) c = Long.compareUnsigned(w3, o.w3);
        return c;
    }

    @Override
    public String toString() {
        return toHex();
    }
}
