package io.orbitkv.state.protocol;

import java.util.Objects;

/**
 * What {@link FrameDecoder#decode} found at the front of a receive buffer.
 *
 * <p>Values; immutable and thread-safe. Exactly one of: a whole frame, a request for more bytes,
 * or a refusal that says whether the stream can continue past the bad frame.
 */
public sealed interface DecodeResult {

    /** A valid frame of {@code bytesConsumed} bytes; the caller advances its buffer by that much. */
    record Decoded(long requestId, Frame frame, int bytesConsumed) implements DecodeResult {
        public Decoded {
            Objects.requireNonNull(frame, "frame");
            if (bytesConsumed < FrameLayout.HEADER_BYTES) {
                throw new IllegalArgumentException("a frame is at least " + FrameLayout.HEADER_BYTES + " bytes: " + bytesConsumed);
            }
        }
    }

    /** Nothing can be said until at least {@code bytes} more bytes have arrived. */
    record NeedBytes(int bytes) implements DecodeResult {
        public NeedBytes {
            if (bytes < 1) throw new IllegalArgumentException("need at least one byte: " + bytes);
        }
    }

    /**
     * The bytes at the front are not a valid frame. {@code requestId} is the header's (0 when the
     * header itself was refused); answer with ERROR {@code code} under it. When
     * {@code skipBytes > 0} the frame's extent is known and buffered: drop that many bytes and the
     * stream continues. Otherwise ({@code skipBytes == 0}) the stream cannot be resynchronised:
     * send the ERROR and close the connection.
     */
    record Malformed(ErrorCode code, String message, long requestId, int skipBytes) implements DecodeResult {
        public Malformed {
            Objects.requireNonNull(code, "code");
            Objects.requireNonNull(message, "message");
            if (skipBytes != 0 && skipBytes < FrameLayout.HEADER_BYTES) {
                throw new IllegalArgumentException("skipBytes is 0 or a whole frame: " + skipBytes);
            }
        }

        /** True if the connection can go on after dropping {@link #skipBytes()} bytes. */
        public boolean skippable() {
            return skipBytes > 0;
        }
    }
}
