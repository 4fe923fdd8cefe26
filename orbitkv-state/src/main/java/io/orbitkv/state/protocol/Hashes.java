package io.orbitkv.state.protocol;

import io.orbitkv.state.StateKey;
import io.orbitkv.state.StateKeys;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * A packed list of equal-width page names (engine block hashes or 32-byte StateKeys), page 0
 * first, exactly as they travel in a QUERY group or a PUBLISH_RESERVE entry.
 *
 * <p>Immutable and thread-safe: the bytes are copied in and never handed out. Invariants:
 * {@code 1 <= width <= }{@value StateKeys#MAX_BLOCK_HASH_BYTES}; {@code count >= 0};
 * {@code bytes.length == width * count}. Equality is by content, so frames holding hashes
 * compare by value.
 *
 * <p>Design note: one packed {@code byte[]} rather than a {@code byte[]} per page: a 65,536-page
 * QUERY is one 2 MiB array instead of 65,536 arrays with 16 bytes of header each, and the codec
 * moves it with one bulk copy.
 */
public final class Hashes {

    private final int width;
    private final byte[] bytes;

    private Hashes(int width, byte[] bytes) {
        this.width = width;
        this.bytes = bytes;
    }

    /** Hashes of {@code width} bytes each, packed in {@code packed} (copied). */
    public static Hashes packed(int width, byte[] packed) {
        Objects.requireNonNull(packed, "packed");
        requireWidth(width);
        if (packed.length % width != 0) {
            throw new IllegalArgumentException(packed.length + " bytes are not a whole number of " + width + "-byte hashes");
        }
        return new Hashes(width, packed.clone());
    }

    /** The given hashes, which must all have the same width; at least one. */
    public static Hashes of(List<byte[]> hashes) {
        if (hashes.isEmpty()) throw new IllegalArgumentException("use packed(width, new byte[0]) for no hashes");
        int width = hashes.getFirst().length;
        requireWidth(width);
        byte[] out = new byte[width * hashes.size()];
        for (int i = 0; i < hashes.size(); i++) {
            byte[] h = hashes.get(i);
            if (h.length != width) throw new IllegalArgumentException("hash " + i + " is " + h.length + " bytes, not " + width);
            System.arraycopy(h, 0, out, i * width, width);
        }
        return new Hashes(width, out);
    }

    /** The keys' canonical 32 bytes each. */
    public static Hashes ofKeys(List<StateKey> keys) {
        byte[] out = new byte[StateKey.BYTES * keys.size()];
        MemorySegment seg = MemorySegment.ofArray(out);
        for (int i = 0; i < keys.size(); i++) keys.get(i).write(seg, (long) i * StateKey.BYTES);
        return new Hashes(StateKey.BYTES, out);
    }

    /** Bytes per hash. */
    public int width() {
        return width;
    }

    /** Number of hashes. */
    public int count() {
        return bytes.length / width;
    }

    /** A copy of hash {@code index}. */
    public byte[] get(int index) {
        Objects.checkIndex(index, count());
        return Arrays.copyOfRange(bytes, index * width, (index + 1) * width);
    }

    /**
     * {@code Arrays.hashCode} of hash {@code index}'s bytes, computed in place (no copy): for
     * tables keyed by page names. Not collision resistant.
     */
    public int hashCodeAt(int index) {
        Objects.checkIndex(index, count());
        int h = 1;
        for (int k = index * width, end = k + width; k < end; k++) h = 31 * h + bytes[k];
        return h;
    }

    /** True when hash {@code index} has exactly the bytes of {@code other}, compared in place. */
    public boolean equalsAt(int index, byte[] other) {
        Objects.checkIndex(index, count());
        return Arrays.equals(bytes, index * width, (index + 1) * width, other, 0, other.length);
    }

    /**
     * How many leading hashes {@code other} has in common with these (same width, same bytes, in
     * order): one vectorized compare of the packed arrays; 0 when the widths differ.
     */
    public int commonPrefix(Hashes other) {
        if (other.width != width) return 0;
        int mismatch = Arrays.mismatch(bytes, other.bytes);
        int sharedBytes = mismatch < 0 ? bytes.length : mismatch;
        return sharedBytes / width;
    }

    /** Hash {@code index} read as a StateKey; requires a width of 32. */
    public StateKey key(int index) {
        if (width != StateKey.BYTES) throw new IllegalStateException("hashes of width " + width + " are not keys");
        Objects.checkIndex(index, count());
        return StateKey.read(MemorySegment.ofArray(bytes), (long) index * width);
    }

    /** Total bytes, {@code width * count}. */
    public int byteSize() {
        return bytes.length;
    }

    /** Appends the packed bytes to {@code out}. */
    void writeTo(WireWriter out) {
        out.bytes(bytes);
    }

    /** Wraps {@code packed} without copying; the caller gives up the array. */
    static Hashes adopt(int width, byte[] packed) {
        return new Hashes(width, packed);
    }

    private static void requireWidth(int width) {
        if (width < 1 || width > StateKeys.MAX_BLOCK_HASH_BYTES) {
            throw new IllegalArgumentException("hash width must be 1.." + StateKeys.MAX_BLOCK_HASH_BYTES + ": " + width);
        }
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Hashes h && h.width == width && Arrays.equals(h.bytes, bytes);
    }

    @Override
    public int hashCode() {
        return 31 * width + Arrays.hashCode(bytes);
    }

    @Override
    public String toString() {
        return "Hashes[width=" + width + ", count=" + count() + "]";
    }
}
