package io.orbitkv.core.storage.dram;

import io.orbitkv.state.StateKey;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;

/**
 * Test helpers: deterministic keys and key-derived "canary" bytes. A slot that holds a key's
 * canary holds that key's image; any reuse of the slot by another key changes the bytes.
 */
final class TestImages {

    private TestImages() {
    }

    /** A distinct, well-mixed key for each {@code i}. */
    static StateKey key(long i) {
        ByteBuffer b = ByteBuffer.allocate(StateKey.BYTES);
        long x = i;
        for (int w = 0; w < 4; w++) {
            x = mix(x + 0x9E3779B97F4A7C15L * (w + 1));
            b.putLong(x);
        }
        return StateKey.ofBytes(b.array());
    }

    /** Fills {@code segment} with bytes derived from {@code key} and each position. */
    static void writeCanary(MemorySegment segment, StateKey key) {
        long seed = key.prefix64();
        long size = segment.byteSize();
        long words = size / 8;
        for (long w = 0; w < words; w++) {
            segment.set(ValueLayout.JAVA_LONG_UNALIGNED, w * 8, mix(seed + w));
        }
        for (long o = words * 8; o < size; o++) {
            segment.set(ValueLayout.JAVA_BYTE, o, (byte) mix(seed + o));
        }
    }

    /** True when {@code segment} holds exactly {@code key}'s canary. */
    static boolean hasCanary(MemorySegment segment, StateKey key) {
        long seed = key.prefix64();
        long size = segment.byteSize();
        long words = size / 8;
        for (long w = 0; w < words; w++) {
            if (segment.get(ValueLayout.JAVA_LONG_UNALIGNED, w * 8) != mix(seed + w)) return false;
        }
        for (long o = words * 8; o < size; o++) {
            if (segment.get(ValueLayout.JAVA_BYTE, o) != (byte) mix(seed + o)) return false;
        }
        return true;
    }

    /** SplitMix64 finaliser. */
    static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }
}
