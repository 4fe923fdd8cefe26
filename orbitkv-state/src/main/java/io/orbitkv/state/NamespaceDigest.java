package io.orbitkv.state;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.HexFormat;

/**
 * The 32-byte digest of a namespace (model, layout, dtype, ...) as recorded in every SSD extent
 * header, so that a read can prove the bytes belong to the namespace it was asked for.
 *
 * <p>Immutable value; four big-endian words like {@link io.orbitkv.state.StateKey}, so a
 * digest costs 48 bytes on the heap and callers normally share one instance per namespace.
 */
public record NamespaceDigest(long w0, long w1, long w2, long w3) {

    /** Size of a digest in bytes. */
    public static final int BYTES = 32;

    private static final ValueLayout.OfLong BE_LONG =
            ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    /** Builds a digest from exactly {@value #BYTES} bytes; the array is not retained. */
    public static NamespaceDigest ofBytes(byte[] bytes) {
        if (bytes.length != BYTES) {
            throw new IllegalArgumentException("a namespace digest is 32 bytes, got " + bytes.length);
        }
        return read(MemorySegment.ofArray(bytes), 0);
    }

    /** Reads a digest stored in canonical (big-endian) byte order at {@code offset}. */
    public static NamespaceDigest read(MemorySegment segment, long offset) {
        return new NamespaceDigest(
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

    @Override
    public String toString() {
        byte[] out = new byte[BYTES];
        write(MemorySegment.ofArray(out), 0);
        return HexFormat.of().formatHex(out);
    }
}
