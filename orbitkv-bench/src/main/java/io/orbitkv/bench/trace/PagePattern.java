package io.orbitkv.bench.trace;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;

/**
 * The bytes of a trace block's page and the engine block hash that names it, both derived from
 * the block id alone, so every restored byte can be checked against what was published without
 * keeping a copy: page word {@code j} of block {@code b} is {@code mix(b, j)}, a SplitMix64
 * finalizer of the pair, so pages of different blocks (and words within a page) differ.
 *
 * <p>The block hash is SHA-256 of a fixed label and the id (little-endian), the same 32-byte form
 * engines pass as their block hashes; the Manager turns it into the StateKey under the replay's
 * namespace. Stateless; thread-safe.
 */
public final class PagePattern {

    private static final ValueLayout.OfLong WORD = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final byte[] LABEL = "orbitkv-trace-block\0".getBytes(StandardCharsets.US_ASCII);

    private PagePattern() {}

    /** The 32-byte engine block hash of trace block {@code blockId}. */
    public static byte[] blockHash(long blockId) {
        try {
            MessageDigest sha = MessageDigest.getInstance("SHA-256");
            sha.update(LABEL);
            byte[] id = new byte[Long.BYTES];
            for (int i = 0; i < id.length; i++) id[i] = (byte) (blockId >>> (8 * i));
            sha.update(id);
            return sha.digest();
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is missing from this JVM", e);
        }
    }

    /** Writes block {@code blockId}'s page into {@code page} (its whole length, a multiple of 8 bytes). */
    public static void fill(MemorySegment page, long blockId) {
        long words = requireWords(page);
        for (long j = 0; j < words; j++) page.setAtIndex(WORD, j, mix(blockId, j));
    }

    /** Bytes of {@code page} that differ from block {@code blockId}'s page (0 when it is exactly that page). */
    public static long wrongBytes(MemorySegment page, long blockId) {
        long words = requireWords(page);
        long wrong = 0;
        for (long j = 0; j < words; j++) {
            long diff = page.getAtIndex(WORD, j) ^ mix(blockId, j);
            if (diff != 0) {
                for (int b = 0; b < Long.BYTES; b++) {
                    if (((diff >>> (8 * b)) & 0xFF) != 0) wrong++;
                }
            }
        }
        return wrong;
    }

    static long mix(long blockId, long word) {
        long z = blockId * 0x9E3779B97F4A7C15L + word * 0xBF58476D1CE4E5B9L + 0x94D049BB133111EBL;
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    private static long requireWords(MemorySegment page) {
        if (page.byteSize() % Long.BYTES != 0) {
            throw new IllegalArgumentException("page length must be a multiple of 8 bytes: " + page.byteSize());
        }
        return page.byteSize() / Long.BYTES;
    }
}
