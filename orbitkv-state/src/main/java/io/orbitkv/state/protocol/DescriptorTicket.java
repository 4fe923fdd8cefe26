package io.orbitkv.state.protocol;

import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Objects;

/**
 * A 16-byte secret that names one hand-over on the Manager's descriptor socket (protocol §6.11):
 * the arena ticket REGISTERED carries, or the handle the descriptor socket gives back for a region
 * descriptor that REGISTER_REGION then names. Value; immutable (the bytes are copied in and out).
 *
 * <p>Design note: 128 random bits from {@link SecureRandom}: a same-uid process that guesses has
 * one try per connection at 2^-128 odds before the ticket expires (seconds) or is used (once).
 * {@link #toString()} prints a digest prefix, never the secret, so logs cannot leak it;
 * {@link #equals} is constant-time.
 */
public final class DescriptorTicket {

    /** Bytes of a ticket on the wire. */
    public static final int BYTES = 16;
    private static final SecureRandom RANDOM = new SecureRandom();

    private final byte[] bytes;

    private DescriptorTicket(byte[] bytes) {
        this.bytes = bytes;
    }

    /** A ticket of exactly {@value #BYTES} given bytes (copied). */
    public static DescriptorTicket of(byte[] bytes) {
        Objects.requireNonNull(bytes, "bytes");
        if (bytes.length != BYTES) throw new IllegalArgumentException("a ticket is " + BYTES + " bytes: " + bytes.length);
        return new DescriptorTicket(bytes.clone());
    }

    /** A fresh random ticket. */
    public static DescriptorTicket random() {
        byte[] b = new byte[BYTES];
        RANDOM.nextBytes(b);
        return new DescriptorTicket(b);
    }

    /** A copy of the 16 bytes. */
    public byte[] bytes() {
        return bytes.clone();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof DescriptorTicket other && MessageDigest.isEqual(bytes, other.bytes);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(bytes);
    }

    /** Not the secret: the first 4 bytes of its SHA-256, enough to tell two tickets apart in a log. */
    @Override
    public String toString() {
        try {
            byte[] digest = MessageDigest.getInstance("SHA-256").digest(bytes);
            return "ticket#" + HexFormat.of().formatHex(digest, 0, 4);
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is required by every JDK", e);
        }
    }
}
