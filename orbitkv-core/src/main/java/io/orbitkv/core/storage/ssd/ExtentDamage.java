package io.orbitkv.core.storage.ssd;

/**
 * Why an extent (or what looked like the start of one) cannot be served. Used both by
 * {@link RecoveryReport} (drops counted during the restart scan) and by
 * {@link ReadResult.Corrupt} (drops found by a pinned read).
 */
public enum ExtentDamage {
    /** The block starts with the extent magic but the header CRC32C does not match: torn or flipped header. */
    BAD_HEADER_CRC,
    /** The header is intact but written by a format version this code does not read. */
    UNSUPPORTED_VERSION,
    /** The header is intact but its payload length is impossible for this store (zero, above the configured maximum, or past the end of the file). */
    BAD_LENGTH,
    /** The header is intact but the file ends before the payload does (file truncated or preallocation torn). */
    TRUNCATED,
    /** The header is intact but the payload CRC32C does not match: torn or flipped payload. */
    BAD_PAYLOAD_CRC,
    /** A pinned read found no extent header at the pinned position (it was overwritten by non-header bytes). */
    MISSING_HEADER,
    /** A pinned read found an intact header of another extent (key, namespace or generation differ). */
    IDENTITY_MISMATCH
}
