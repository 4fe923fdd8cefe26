package io.orbitkv.state;

import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;

/**
 * SHA-256 for the derivations of this package.
 *
 * <p>Thread model: each call returns a fresh {@link MessageDigest} that belongs to the caller; the
 * only shared state is one never-updated prototype per thread, which is cloned, so callers may
 * nest (a caller holding a digest may call another derivation).
 *
 * <p>Design note: {@code MessageDigest.getInstance} walks the provider list and reflects a new
 * instance on every call; a QUERY of 1,024 block hashes derives 1,024 keys, and a JFR profile of
 * the Manager (bench-manager) put that lookup plus its allocations at about 40 % of the QUERY's
 * CPU time. Cloning a per-thread prototype copies two small arrays instead.
 */
final class Sha256 {

    private static final ThreadLocal<MessageDigest> PROTOTYPE = ThreadLocal.withInitial(Sha256::lookUp);

    private Sha256() {
    }

    static MessageDigest newDigest() {
        try {
            return (MessageDigest) PROTOTYPE.get().clone();
        } catch (CloneNotSupportedException e) {
            return lookUp();
        }
    }

    private static MessageDigest lookUp() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            // Every Java SE implementation must provide SHA-256.
            throw new IllegalStateException("the JDK has no SHA-256", e);
        }
    }

    static byte[] of(byte[] input) {
        return newDigest().digest(input);
    }
}
