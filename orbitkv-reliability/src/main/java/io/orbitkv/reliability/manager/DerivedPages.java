package io.orbitkv.reliability.manager;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * Pages whose every byte follows from their name, so whatever a Manager serves can be checked
 * byte for byte without keeping the published images: a page is named by a 16-byte engine block
 * hash (stream, index), its length is drawn from the name within {@code [minBytes, maxBytes]}, and
 * its 8-byte words are SplitMix64 of the name's hash and the word index. Stateless.
 *
 * <p>Design note: SplitMix64 rather than a cryptographic hash because the check runs on every
 * page served (tens of MiB per second on one core) and only has to make a page of another name,
 * a shifted page or a torn write differ, which a 64-bit mix of (name, offset) does in every word.
 */
public final class DerivedPages {

    /** Bytes of a page name. */
    public static final int NAME_BYTES = 16;

    private static final ValueLayout.OfLong WORD = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private DerivedPages() {}

    /** The block hash naming page {@code index} of {@code stream}. */
    public static byte[] name(long stream, long index) {
        byte[] name = new byte[NAME_BYTES];
        MemorySegment s = MemorySegment.ofArray(name);
        s.set(WORD, 0, stream);
        s.set(WORD, 8, index);
        return name;
    }

    /** The length of the page named {@code name}, in {@code [minBytes, maxBytes]}. */
    public static int lengthBytes(byte[] name, int minBytes, int maxBytes) {
        if (minBytes < 1 || maxBytes < minBytes) throw new IllegalArgumentException("page lengths " + minBytes + ".." + maxBytes);
        return minBytes + (int) Long.remainderUnsigned(mix(seed(name) ^ 0x5DEECE66DL), maxBytes - minBytes + 1L);
    }

    /** The image of the page named {@code name}, {@code lengthBytes} long. */
    public static MemorySegment image(byte[] name, int lengthBytes) {
        byte[] b = new byte[lengthBytes];
        MemorySegment s = MemorySegment.ofArray(b);
        long seed = seed(name);
        int words = lengthBytes / 8;
        for (int i = 0; i < words; i++) s.set(WORD, 8L * i, mix(seed + i));
        long last = mix(seed + words);
        for (int j = words * 8; j < lengthBytes; j++) b[j] = (byte) (last >>> (8 * (j - words * 8)));
        return s;
    }

    /**
     * The offset of the first byte of {@code served} that is not the page named {@code name} of
     * {@code lengthBytes}, or -1 when every byte is right; a length mismatch is the shorter length.
     */
    public static long firstWrongByte(byte[] name, int lengthBytes, MemorySegment served) {
        if (served.byteSize() != lengthBytes) return Math.min(served.byteSize(), lengthBytes);
        long seed = seed(name);
        int words = lengthBytes / 8;
        for (int i = 0; i < words; i++) {
            long diff = served.get(WORD, 8L * i) ^ mix(seed + i);
            if (diff != 0) return 8L * i + Long.numberOfTrailingZeros(diff) / 8; // little-endian: low byte first
        }
        long last = mix(seed + words);
        for (int j = words * 8; j < lengthBytes; j++) {
            if (served.get(ValueLayout.JAVA_BYTE, j) != (byte) (last >>> (8 * (j - words * 8)))) return j;
        }
        return -1;
    }

    private static long seed(byte[] name) {
        long h = 0x9E3779B97F4A7C15L;
        for (byte b : name) h = mix(h ^ (b & 0xFF));
        return h;
    }

    /** SplitMix64's finalizer (Steele, Lea, Flood 2014). */
    private static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }
}
