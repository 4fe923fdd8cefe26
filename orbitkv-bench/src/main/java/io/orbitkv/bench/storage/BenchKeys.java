package io.orbitkv.bench.storage;

import io.orbitkv.state.StateKey;

import java.nio.ByteBuffer;

/**
 * Deterministic, well-spread {@link StateKey}s for benchmarks: key {@code i} is four SplitMix64
 * outputs of {@code i}, so hash tables see the spread real content digests have.
 *
 * <p>Stateless and thread-safe. Design note: SHA-256 of a counter would do the same at ~1 µs per
 * key, which the 1 M block heap runs would pay a second for; SplitMix64 costs nanoseconds and has
 * full avalanche, which is all a hash table needs.
 */
public final class BenchKeys {

    private BenchKeys() {}

    public static StateKey key(long i) {
        ByteBuffer b = ByteBuffer.allocate(StateKey.BYTES);
        long x = i * 4;
        for (int w = 0; w < 4; w++) b.putLong(mix(++x));
        return StateKey.ofBytes(b.array());
    }

    /** SplitMix64's finaliser (Steele, Lea, Flood 2014). */
    static long mix(long z) {
        z = (z + 0x9E3779B97F4A7C15L);
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }
}
