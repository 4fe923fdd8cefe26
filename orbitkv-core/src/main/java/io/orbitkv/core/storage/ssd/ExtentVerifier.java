package io.orbitkv.core.storage.ssd;

import java.lang.foreign.MemorySegment;
import java.util.Optional;

/**
 * The checks every read route applies before a byte is served, in one place so the positional
 * and io_uring routes cannot drift apart: the header block read back must decode, name the
 * pinned key, namespace and generation (and payload length and CRC), and the payload read
 * back must be long enough and match the CRC32C the header records.
 *
 * <p>Stateless and thread-safe.
 */
final class ExtentVerifier {

    private ExtentVerifier() {}

    /** Damage found in the header block ({@code bytesRead} of it were read), or empty when it names {@code e}. */
    static Optional<ExtentDamage> header(MemorySegment header, long bytesRead, Extent e, int maxPayloadBytes) {
        if (bytesRead < ExtentLayout.HEADER_BYTES) return Optional.of(ExtentDamage.TRUNCATED);
        return switch (ExtentLayout.decodeHeader(header, maxPayloadBytes)) {
            case ExtentLayout.HeaderDecode.NotAHeader() -> Optional.of(ExtentDamage.MISSING_HEADER);
            case ExtentLayout.HeaderDecode.Damaged(ExtentDamage damage, long ignored) -> Optional.of(damage);
            case ExtentLayout.HeaderDecode.Valid(ExtentHeader h) ->
                    h.equals(e.header()) ? Optional.empty() : Optional.of(ExtentDamage.IDENTITY_MISMATCH);
        };
    }

    /** Damage found in the payload ({@code bytesRead} of it were read), or empty when its CRC32C matches. */
    static Optional<ExtentDamage> payload(MemorySegment payload, long bytesRead, Extent e) {
        if (bytesRead < e.payloadBytes) return Optional.of(ExtentDamage.TRUNCATED);
        if (ExtentLayout.crc32c(payload, e.payloadBytes) != e.payloadCrc32c) return Optional.of(ExtentDamage.BAD_PAYLOAD_CRC);
        return Optional.empty();
    }
}
