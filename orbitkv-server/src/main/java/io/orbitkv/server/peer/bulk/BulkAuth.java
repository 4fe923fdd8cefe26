package io.orbitkv.server.peer.bulk;

import io.orbitkv.server.cluster.ClusterSecurity;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.Objects;

/**
 * Challenge–response authentication of a bulk connection with the cluster token, in both
 * directions, so the token never crosses the wire: the source sends a fresh 32-byte nonce
 * (HELLO); the requester answers its own nonce and
 * {@code HMAC-SHA256(token, "orbitkv-bulk/1 requester" | clusterId | serverNonce | clientNonce)}
 * (AUTH); the source checks it in constant time and answers
 * {@code HMAC-SHA256(token, "orbitkv-bulk/1 source" | clusterId | serverNonce | clientNonce)}
 * (AUTH_OK), which the requester checks before it sends any request.
 *
 * <p>Immutable; thread-safe ({@link Mac} instances are made per call, ~1 µs). Invariant: the
 * token and the MACs are compared only with {@link MessageDigest#isEqual} (time independent of
 * where they differ).
 *
 * <p>Design note: the two directions use different labels so a source cannot replay the
 * requester's MAC as its own; fresh nonces on both sides make a recorded handshake useless on a
 * new connection. A wrong cluster id fails the MAC like a wrong token (the id is in the input),
 * which the gRPC port reports separately; here both are one counter because a data connection
 * is opened only to endpoints the (already authenticated) gRPC port named.
 */
public final class BulkAuth {

    private static final byte[] REQUESTER = "orbitkv-bulk/1 requester".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] SOURCE = "orbitkv-bulk/1 source".getBytes(StandardCharsets.US_ASCII);
    private static final SecureRandom RANDOM = new SecureRandom();

    private final byte[] clusterId;
    private final SecretKeySpec key;

    public BulkAuth(ClusterSecurity security) {
        Objects.requireNonNull(security, "security");
        this.clusterId = security.clusterId().getBytes(StandardCharsets.UTF_8);
        this.key = new SecretKeySpec(security.token(), "HmacSHA256");
    }

    /** A fresh random nonce. */
    public static byte[] nonce() {
        byte[] n = new byte[BulkLayout.NONCE_BYTES];
        RANDOM.nextBytes(n);
        return n;
    }

    /** The MAC a requester sends for this pair of nonces. */
    public byte[] requesterMac(byte[] serverNonce, byte[] clientNonce) {
        return mac(REQUESTER, serverNonce, clientNonce);
    }

    /** The MAC a source answers for this pair of nonces. */
    public byte[] sourceMac(byte[] serverNonce, byte[] clientNonce) {
        return mac(SOURCE, serverNonce, clientNonce);
    }

    /** Constant-time comparison of a received MAC with the expected one. */
    public static boolean matches(byte[] expected, byte[] received) {
        return MessageDigest.isEqual(expected, received);
    }

    private byte[] mac(byte[] label, byte[] serverNonce, byte[] clientNonce) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(key);
            mac.update(label);
            mac.update((byte) 0);
            mac.update(clusterId);
            mac.update((byte) 0);
            mac.update(serverNonce);
            mac.update(clientNonce);
            return mac.doFinal();
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 is required of every JDK", e);
        }
    }
}
