package io.orbitkv.state.protocol;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.Objects;
import java.util.Optional;

/**
 * The descriptor socket's two messages (protocol §6.11): the client's 24-byte request and the
 * Manager's 24-byte reply, which carries the descriptors as {@code SCM_RIGHTS}. One request and
 * one reply per connection; the Manager closes after its reply.
 *
 * <pre>
 * request (client to Manager)                reply (Manager to client, one sendmsg)
 * 0      4        6      8                   0      4          6          8
 * +------+--------+------+---------------+   +------+----------+----------+---------------+
 * |"OKFD"| version|  op  | ticket (16)   |   |"OKFD"|error_code| fd_count | handle (16)   |
 * |      |  u16   | u16  | or 16 zeros   |   |      |   u16    |   u16    | or 16 zeros   |
 * +------+--------+------+---------------+   +------+----------+----------+---------------+
 * </pre>
 *
 * <p>{@code op} 1 ARENAS: the ticket of REGISTERED; the reply carries the namespace's arena
 * descriptors in arena-index order ({@code fd_count} of them). {@code op} 2 REGION: 16 zero bytes,
 * and exactly one descriptor (the region's memory) travels with the request; the reply's handle
 * names it in REGISTER_REGION. {@code error_code} 0 is success, else an {@link ErrorCode}.
 *
 * <p>Values and static codecs; thread-safe. Design note: a fixed 24-byte message both ways, so a
 * reader needs no length field and refuses anything else by size; the magic makes a client that
 * connected to the channel socket by mistake fail at once instead of hanging.
 */
public final class DescriptorExchange {

    /** Bytes of a request and of a reply. */
    public static final int MESSAGE_BYTES = 24;
    /** {@code "OKFD"} read as a little-endian u32. */
    public static final int MAGIC = 0x44464b4f;
    /** Request op: fetch the arenas REGISTERED announced. */
    public static final int OP_ARENAS = 1;
    /** Request op: hand over a region descriptor. */
    public static final int OP_REGION = 2;

    private static final byte[] ZEROS = new byte[DescriptorTicket.BYTES];

    private DescriptorExchange() {
    }

    /** A decoded request: {@code ticket} is present for ARENAS and absent for REGION. */
    public record ExchangeRequest(int op, Optional<DescriptorTicket> ticket) {
        public ExchangeRequest {
            Objects.requireNonNull(ticket, "ticket");
            if (op != OP_ARENAS && op != OP_REGION) throw new IllegalArgumentException("op " + op);
            if ((op == OP_ARENAS) != ticket.isPresent()) throw new IllegalArgumentException("ARENAS, and only it, has a ticket");
        }
    }

    /** A decoded reply: {@code errorCode} 0 on success; {@code handle} only on a REGION success. */
    public record ExchangeReply(int errorCode, int fdCount, Optional<DescriptorTicket> handle) {
        public ExchangeReply {
            Objects.requireNonNull(handle, "handle");
            if (errorCode < 0 || errorCode > Check.U16_MAX || fdCount < 0 || fdCount > Check.U16_MAX) {
                throw new IllegalArgumentException("error_code " + errorCode + ", fd_count " + fdCount);
            }
        }

        /** The error as an {@link ErrorCode}; empty on success or for a code this side does not know. */
        public Optional<ErrorCode> error() {
            return errorCode == 0 ? Optional.empty() : ErrorCode.ofCode(errorCode);
        }
    }

    /** The ARENAS request for {@code ticket}. */
    public static byte[] arenasRequest(DescriptorTicket ticket) {
        return message(MAGIC, FrameLayout.VERSION, OP_ARENAS, ticket.bytes());
    }

    /** The REGION request (its descriptor travels as ancillary data). */
    public static byte[] regionRequest() {
        return message(MAGIC, FrameLayout.VERSION, OP_REGION, ZEROS);
    }

    /** A success reply carrying {@code fdCount} descriptors, with {@code handle} for REGION. */
    public static byte[] okReply(int fdCount, Optional<DescriptorTicket> handle) {
        return message(MAGIC, 0, fdCount, handle.map(DescriptorTicket::bytes).orElse(ZEROS));
    }

    /** A refusal: no descriptors, no handle. */
    public static byte[] errorReply(ErrorCode code) {
        return message(MAGIC, code.code(), 0, ZEROS);
    }

    private static byte[] message(int magic, int second, int third, byte[] tail) {
        ByteBuffer b = ByteBuffer.allocate(MESSAGE_BYTES).order(ByteOrder.LITTLE_ENDIAN);
        b.putInt(magic).putShort((short) second).putShort((short) third).put(tail);
        return b.array();
    }

    /**
     * Decodes a request, or the error the Manager answers: UNSUPPORTED_VERSION for another
     * version, MALFORMED for anything else wrong (size, magic, op, a non-zero pad).
     */
    public static DecodedRequest decodeRequest(byte[] message) {
        if (message.length != MESSAGE_BYTES) return new DecodedRequest.Refused(ErrorCode.MALFORMED);
        ByteBuffer b = ByteBuffer.wrap(message).order(ByteOrder.LITTLE_ENDIAN);
        if (b.getInt(0) != MAGIC) return new DecodedRequest.Refused(ErrorCode.MALFORMED);
        if (Short.toUnsignedInt(b.getShort(4)) != FrameLayout.VERSION) {
            return new DecodedRequest.Refused(ErrorCode.UNSUPPORTED_VERSION);
        }
        int op = Short.toUnsignedInt(b.getShort(6));
        byte[] tail = Arrays.copyOfRange(message, 8, MESSAGE_BYTES);
        return switch (op) {
            case OP_ARENAS -> new DecodedRequest.Ok(new ExchangeRequest(op, Optional.of(DescriptorTicket.of(tail))));
            case OP_REGION -> Arrays.equals(tail, ZEROS)
                    ? new DecodedRequest.Ok(new ExchangeRequest(op, Optional.empty()))
                    : new DecodedRequest.Refused(ErrorCode.MALFORMED);
            default -> new DecodedRequest.Refused(ErrorCode.MALFORMED);
        };
    }

    /** A request, or the error that refuses it. */
    public sealed interface DecodedRequest {
        /** A well-formed request. */
        record Ok(ExchangeRequest request) implements DecodedRequest {
        }

        /** Refused with {@code code}. */
        record Refused(ErrorCode code) implements DecodedRequest {
        }
    }

    /** Decodes a reply; throws {@link IllegalArgumentException} for anything that is not one. */
    public static ExchangeReply decodeReply(byte[] message) {
        if (message.length != MESSAGE_BYTES) throw new IllegalArgumentException("a reply is " + MESSAGE_BYTES + " bytes");
        ByteBuffer b = ByteBuffer.wrap(message).order(ByteOrder.LITTLE_ENDIAN);
        if (b.getInt(0) != MAGIC) throw new IllegalArgumentException("not a descriptor socket reply (bad magic)");
        int error = Short.toUnsignedInt(b.getShort(4));
        int count = Short.toUnsignedInt(b.getShort(6));
        byte[] tail = Arrays.copyOfRange(message, 8, MESSAGE_BYTES);
        Optional<DescriptorTicket> handle = Arrays.equals(tail, ZEROS) ? Optional.empty() : Optional.of(DescriptorTicket.of(tail));
        return new ExchangeReply(error, count, handle);
    }
}
