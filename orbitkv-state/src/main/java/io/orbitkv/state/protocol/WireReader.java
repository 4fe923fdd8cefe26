package io.orbitkv.state.protocol;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/**
 * A bounds-checked little-endian cursor over one frame body. Every read checks the bytes are
 * there first and every count is checked against its budget and against the bytes left before
 * anything is allocated for it; a failure throws {@link BadFrame}, which
 * {@link FrameDecoder} turns into a {@link DecodeResult.Malformed}. Confined to the decoding thread.
 */
final class WireReader {

    /** A refusal of the frame being read; no stack trace (it is an expected outcome, caught one frame up). */
    static final class BadFrame extends RuntimeException {
        private static final long serialVersionUID = 1L;
        final ErrorCode code;

        BadFrame(ErrorCode code, String message) {
            super(message, null, false, false);
            this.code = code;
        }
    }

    private final ByteBuffer body;

    /** Reads {@code body} from its position to its limit; the buffer's own position is not moved. */
    WireReader(ByteBuffer body) {
        this.body = body.slice().order(ByteOrder.LITTLE_ENDIAN);
    }

    int offset() {
        return FrameLayout.HEADER_BYTES + body.position();
    }

    int remaining() {
        return body.remaining();
    }

    private void need(int bytes, String field) {
        if (body.remaining() < bytes) {
            throw malformed("truncated " + field + " at offset " + offset() + ": need " + bytes + " bytes, "
                    + body.remaining() + " left");
        }
    }

    int u8(String field) {
        need(1, field);
        return Byte.toUnsignedInt(body.get());
    }

    int u16(String field) {
        need(2, field);
        return Short.toUnsignedInt(body.getShort());
    }

    /** A u32 that must be at most 2^31-1. */
    int u31(String field) {
        need(4, field);
        int at = offset();
        int v = body.getInt();
        if (v < 0) throw malformed(field + " at offset " + at + " exceeds 2^31-1: " + Integer.toUnsignedString(v));
        return v;
    }

    /** A u64 that must be at most 2^63-1. */
    long u63(String field) {
        need(8, field);
        int at = offset();
        long v = body.getLong();
        if (v < 0) throw malformed(field + " at offset " + at + " exceeds 2^63-1: " + Long.toUnsignedString(v));
        return v;
    }

    void zero8(String field) {
        int at = offset();
        if (u8(field) != 0) throw malformed("reserved " + field + " at offset " + at + " must be 0");
    }

    void zero16(String field) {
        int at = offset();
        if (u16(field) != 0) throw malformed("reserved " + field + " at offset " + at + " must be 0");
    }

    void zero32(String field) {
        need(4, field);
        int at = offset();
        if (body.getInt() != 0) throw malformed("reserved " + field + " at offset " + at + " must be 0");
    }

    boolean flag(String field) {
        int at = offset();
        int v = u8(field);
        if (v > 1) throw malformed(field + " at offset " + at + " must be 0 or 1: " + v);
        return v == 1;
    }

    /**
     * Checks a count already read: at most {@code budget} ({@link ErrorCode#TOO_LARGE} otherwise,
     * naming {@code budgetName}), and {@code count * minEntryBytes} must fit in what is left.
     */
    int checkCount(String field, long count, int budget, String budgetName, int minEntryBytes) {
        if (count > budget) {
            throw new BadFrame(ErrorCode.TOO_LARGE, field + " " + count + " exceeds " + budgetName + " " + budget);
        }
        if (count * minEntryBytes > body.remaining()) {
            throw malformed(field + " " + count + " needs at least " + count * minEntryBytes + " bytes, "
                    + body.remaining() + " left");
        }
        return (int) count;
    }

    /** {@code n} raw bytes; {@code n} must already be known to be bounded. */
    byte[] bytes(int n, String field) {
        need(n, field);
        byte[] out = new byte[n];
        body.get(out);
        return out;
    }

    /** u16 length, then that many bytes of well-formed UTF-8, at most {@code maxBytes}. */
    String string16(String field, int minBytes, int maxBytes) {
        return string16(field, minBytes, maxBytes, ErrorCode.TOO_LARGE);
    }

    /** As {@link #string16(String, int, int)}, refusing more than {@code maxBytes} with {@code overLong}. */
    String string16(String field, int minBytes, int maxBytes, ErrorCode overLong) {
        int at = offset();
        int n = u16(field + " length");
        if (n > maxBytes) throw new BadFrame(overLong, field + " at offset " + at + " is " + n
                + " bytes, more than " + (overLong == ErrorCode.TOO_LARGE ? "maxStringBytes " : "") + maxBytes);
        if (n < minBytes) throw malformed(field + " at offset " + at + " must not be empty");
        byte[] raw = bytes(n, field);
        try {
            return StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(ByteBuffer.wrap(raw)).toString();
        } catch (CharacterCodingException e) {
            throw malformed(field + " at offset " + (at + 2) + " is not valid UTF-8");
        }
    }

    /** u32 length of at most {@code maxBytes} (MALFORMED otherwise), then the bytes. */
    byte[] blob32(String field, int maxBytes) {
        int at = offset();
        need(4, field + " length");
        long n = Integer.toUnsignedLong(body.getInt());
        if (n > maxBytes) throw malformed(field + " at offset " + at + " is " + n + " bytes, more than " + maxBytes);
        return bytes((int) n, field);
    }

    void requireEnd() {
        if (body.hasRemaining()) {
            throw malformed(body.remaining() + " trailing bytes after the body at offset " + offset());
        }
    }

    static BadFrame malformed(String message) {
        return new BadFrame(ErrorCode.MALFORMED, message);
    }
}
