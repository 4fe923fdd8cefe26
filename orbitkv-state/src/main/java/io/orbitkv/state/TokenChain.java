package io.orbitkv.state;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.Objects;

/**
 * The project's chained page hash, for clients whose engine exposes no block hashes.
 *
 * <pre>
 *   h(-1) = SHA-256( "orbitkv/token-chain/v1" (22 ASCII bytes) ‖ namespace digest (32 bytes) )
 *   h(i)  = SHA-256( h(i-1) (32 bytes)
 *                  ‖ tokens[i*P .. (i+1)*P) as P little-endian int32
 *                  ‖ extra (0.. bytes, the same for every page) )
 * </pre>
 * Only full pages get a hash: a trailing partial page is never keyed, because its contents will
 * still change. Each {@code h(i)} covers the whole prefix {@code [0, (i+1)*P)}, so equal hashes
 * mean equal prefixes, and the root binds the chain to one namespace.
 *
 * <p>Stateless and thread-safe.
 *
 * <p>Design note: {@code extra} is the engine's per-request salt (multimodal content hash, cache
 * salt) that vLLM also folds into every block; it is not length-prefixed because it is the last
 * field and one chain uses one {@code extra} for all its pages.
 */
public final class TokenChain {

    /** Domain string hashed into the chain root. */
    public static final String ROOT_DOMAIN = "orbitkv/token-chain/v1";

    private TokenChain() {
    }

    /** {@code h(-1)} for this namespace. */
    public static byte[] root(byte[] namespaceDigest) {
        StateKeys.requireDigest(namespaceDigest);
        MessageDigest sha = Sha256.newDigest();
        sha.update(ROOT_DOMAIN.getBytes(StandardCharsets.US_ASCII));
        sha.update(namespaceDigest);
        return sha.digest();
    }

    /**
     * One 32-byte hash per full page of {@code tokens}: {@code tokens.length / pageTokens}
     * hashes, the {@code i}-th covering tokens {@code [0, (i+1)*pageTokens)}.
     */
    public static byte[][] pageHashes(byte[] namespaceDigest, int[] tokens, int pageTokens, byte[] extra) {
        Objects.requireNonNull(tokens, "tokens");
        Objects.requireNonNull(extra, "extra");
        if (pageTokens <= 0) throw new IllegalArgumentException("pageTokens must be > 0: " + pageTokens);
        int pages = tokens.length / pageTokens;
        byte[][] out = new byte[pages][];
        byte[] previous = root(namespaceDigest);
        ByteBuffer page = ByteBuffer.allocate(pageTokens * Integer.BYTES).order(ByteOrder.LITTLE_ENDIAN);
        MessageDigest sha = Sha256.newDigest();
        for (int i = 0; i < pages; i++) {
            page.clear();
            for (int j = i * pageTokens, end = j + pageTokens; j < end; j++) page.putInt(tokens[j]);
            sha.update(previous);
            sha.update(page.array());
            sha.update(extra);
            previous = sha.digest();
            out[i] = previous;
        }
        return out;
    }
}
