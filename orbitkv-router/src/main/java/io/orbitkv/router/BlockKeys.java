package io.orbitkv.router;

/**
 * The router's 64-bit name for a block hash. vLLM names a block by {@code bytes | int}
 * ({@code ExternalBlockHash}); a Manager by the 1..64 bytes the engine sent. The index keeps one
 * {@code long} per block instead of a {@code byte[]} so that a million blocks cost tens of MB,
 * not hundreds.
 *
 * <p>Design note: two different hashes may map to one key (probability about n²/2⁶⁵ for n
 * blocks: 3·10⁻⁸ at a million). A collision can only make the router expect a hit that the
 * Manager then does not report: the Manager validates every hit by its own keys, so the cost is a
 * worse route, never a wrong result. Bytes go through a 64-bit FNV-1a pass and MurmurHash3's
 * finalizer so that short, sequential or shared-prefix hashes still spread.
 */
public final class BlockKeys {

    private static final long FNV_OFFSET = 0xcbf29ce484222325L;
    private static final long FNV_PRIME = 0x100000001b3L;

    private BlockKeys() {}

    /** The key of a hash given as bytes (msgpack bin, hex in JSON). */
    public static long of(byte[] hash) {
        if (hash.length == 0) throw new IllegalArgumentException("a block hash has at least one byte");
        long h = FNV_OFFSET ^ hash.length;
        for (byte b : hash) {
            h ^= b & 0xff;
            h *= FNV_PRIME;
        }
        return mix(h);
    }

    /** The key of a hash given as an integer (vLLM's int form; a trace's block id). */
    public static long of(long hash) {
        return mix(hash ^ 0x9e3779b97f4a7c15L);
    }

    private static long mix(long h) {
        h ^= h >>> 33;
        h *= 0xff51afd7ed558ccdL;
        h ^= h >>> 33;
        h *= 0xc4ceb9fe1a85ec53L;
        h ^= h >>> 33;
        return h;
    }
}
