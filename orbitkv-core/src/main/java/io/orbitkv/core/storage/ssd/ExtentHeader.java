package io.orbitkv.core.storage.ssd;

import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;

import java.util.Objects;

/**
 * The decoded, CRC-checked fields of one extent header (see {@link ExtentLayout}).
 *
 * @param namespace      digest of the namespace the payload belongs to
 * @param key            the page's state key
 * @param generation     store-wide monotonically increasing commit number, positive
 * @param payloadBytes   payload length in bytes (unpadded), positive
 * @param payloadCrc32c  CRC32C of the {@code payloadBytes} payload bytes
 */
public record ExtentHeader(NamespaceDigest namespace, StateKey key, long generation, int payloadBytes, int payloadCrc32c) {

    public ExtentHeader {
        Objects.requireNonNull(namespace, "namespace");
        Objects.requireNonNull(key, "key");
        if (generation <= 0) throw new IllegalArgumentException("generation must be positive: " + generation);
        if (payloadBytes <= 0) throw new IllegalArgumentException("payloadBytes must be positive: " + payloadBytes);
    }

    /** Bytes this extent occupies on disk: header block plus payload padded to the block size. */
    public long footprintBytes() {
        return ExtentLayout.footprintBytes(payloadBytes);
    }
}
