package io.orbitkv.state;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * Derivation of {@link StateKey}s: which bytes name one page of one state group in one namespace.
 *
 * <pre>
 *   key = SHA-256( namespace digest (32 bytes)
 *                ‖ group id        (u32 little-endian)
 *                ‖ block hash      (1..64 bytes, as given) )
 * </pre>
 * The block hash is the last field, so its length needs no prefix: the first 36 bytes are fixed.
 * An engine's 64-bit integer block hash (vLLM) is passed as its 8-byte little-endian two's
 * complement form ({@link #forBlockHash(byte[], int, long)}); 32-byte hashes (SGLang, the
 * project's {@link TokenChain}) are passed as they are.
 *
 * <p>Stateless and thread-safe.
 *
 * <p>Design note: the block hash is already chained by the engine (it covers the whole prefix),
 * so the key only needs to bind it to the namespace and the group; hashing again instead of
 * concatenating keeps keys a fixed 32 bytes, which the storage index and the wire frames assume.
 */
public final class StateKeys {

    /** Largest accepted block hash, in bytes. */
    public static final int MAX_BLOCK_HASH_BYTES = 64;

    private StateKeys() {
    }

    /** The key of the page whose engine block hash is {@code blockHash}. */
    public static StateKey forBlockHash(byte[] namespaceDigest, int groupId, byte[] blockHash) {
        requireDigest(namespaceDigest);
        requireGroup(groupId);
        Objects.requireNonNull(blockHash, "blockHash");
        if (blockHash.length == 0 || blockHash.length > MAX_BLOCK_HASH_BYTES) {
            throw new IllegalArgumentException(
                    "block hash must be 1.." + MAX_BLOCK_HASH_BYTES + " bytes: " + blockHash.length);
        }
        MessageDigest sha = Sha256.newDigest();
        sha.update(namespaceDigest);
        sha.update(u32le(groupId));
        sha.update(blockHash);
        return StateKey.ofBytes(sha.digest());
    }

    /** The key for a 64-bit engine block hash, hashed as its 8 little-endian bytes. */
    public static StateKey forBlockHash(byte[] namespaceDigest, int groupId, long blockHash) {
        byte[] le = ByteBuffer.allocate(Long.BYTES).order(ByteOrder.LITTLE_ENDIAN).putLong(blockHash).array();
        return forBlockHash(namespaceDigest, groupId, le);
    }

    /** Keys of every full page of {@code tokens}, via the {@link TokenChain}. */
    public static List<StateKey> forTokens(byte[] namespaceDigest, int groupId, int[] tokens,
                                           int pageTokens, byte[] extra) {
        byte[][] hashes = TokenChain.pageHashes(namespaceDigest, tokens, pageTokens, extra);
        List<StateKey> keys = new ArrayList<>(hashes.length);
        for (byte[] h : hashes) keys.add(forBlockHash(namespaceDigest, groupId, h));
        return List.copyOf(keys);
    }

    static byte[] u32le(int value) {
        return ByteBuffer.allocate(Integer.BYTES).order(ByteOrder.LITTLE_ENDIAN).putInt(value).array();
    }

    static void requireDigest(byte[] namespaceDigest) {
        Objects.requireNonNull(namespaceDigest, "namespaceDigest");
        if (namespaceDigest.length != Namespace.DIGEST_BYTES) {
            throw new IllegalArgumentException(
                    "a namespace digest is 32 bytes, got " + namespaceDigest.length);
        }
    }

    static void requireGroup(int groupId) {
        if (groupId < 0) throw new IllegalArgumentException("group id must be >= 0: " + groupId);
    }
}
