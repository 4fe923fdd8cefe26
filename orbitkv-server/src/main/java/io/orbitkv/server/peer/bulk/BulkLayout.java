package io.orbitkv.server.peer.bulk;

import io.orbitkv.core.peer.AuthorizeRequest;
import io.orbitkv.core.peer.AuthorizeResult.Rejection;
import io.orbitkv.core.peer.NodeIncarnation;
import io.orbitkv.core.peer.PeerMedium;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * The wire format of the bulk data plane, version {@value #VERSION} (docs/peer-data-plane.md has
 * the same diagrams and the flow). Every frame is an 8-byte header and a body; integers are
 * big-endian.
 *
 * <pre>
 * frame header (8 bytes)
 *  0        1        2                 4                                   8
 *  +--------+--------+-----------------+-----------------------------------+
 *  | type   | version| flags (0)       | bodyBytes (u32)                   |
 *  +--------+--------+-----------------+-----------------------------------+
 *
 * HELLO 0x01, source -> requester, body 36        AUTH 0x02, requester -> source, body 68
 *  +------------+------------------------+         +------------+--------------------+------------------+
 *  | magic OKVB | serverNonce (32)       |         | magic OKVB | clientNonce (32)   | clientMac (32)   |
 *  +------------+------------------------+         +------------+--------------------+------------------+
 * AUTH_OK 0x03, source -> requester, body 32      ERROR 0x7F, either way, body 4, then close
 *  +-----------------------+                       +-----------------+-----------------+
 *  | serverMac (32)        |                       | code (u16)      | reserved (0)    |
 *  +-----------------------+                       +-----------------+-----------------+
 *
 * BATCH_REQUEST 0x10, requester -> source, body 28 + nodeIdBytes + 81 * pageCount
 *  +----------------+--------------------------+--------------------------+-----------+--------+------+
 *  | batchId (u64)  | sourceIncarnation (u64)  | requesterIncarnation(u64)| pageCount | idLen  | 0    |
 *  |                |                          |                          | (u16)     | (u8)   | (u8) |
 *  +----------------+--------------------------+--------------------------+-----------+--------+------+
 *  | requester node id (idLen bytes, UTF-8, 1..128)                                                  |
 *  +----------+----------------+--------+---------------+--------------------------+  x pageCount
 *  | key (32) | namespace (32) | medium | generation    | residencySequence (u64)  |
 *  |          |                | (u8)   | (u64)         |                          |
 *  +----------+----------------+--------+---------------+--------------------------+
 *
 * PAGE 0x20, source -> requester, body 24 + lengthBytes + 4
 *  +----------------+-----------+-----------+-----------------+----------------+-----------------+-----------+
 *  | batchId (u64)  | index(u16)| 0 (u16)   | lengthBytes(u32)| ticketId (u64) | payload ...     | crc32c(u32)|
 *  +----------------+-----------+-----------+-----------------+----------------+-----------------+-----------+
 *
 * PAGE_REFUSED 0x21, source -> requester, body 12
 *  +----------------+-----------+--------+--------+
 *  | batchId (u64)  | index(u16)| reason | 0 (u8) |
 *  +----------------+-----------+--------+--------+
 * </pre>
 *
 * <p>Publication rule: a page becomes visible at the requester only after the whole PAGE frame
 * was read, its payload filled exactly {@code lengthBytes} of the reserved slot, and the CRC32C
 * the requester computed over those bytes equals the trailer's. The trailer is written last, so
 * a frame cut anywhere before it is incomplete and discarded.
 *
 * <p>Decoding is total: every count and length is checked against its limit and against the
 * bytes the header announced before anything is allocated; a violation is {@link Malformed} and
 * the reader closes the connection.
 */
public final class BulkLayout {

    public static final int VERSION = 1;
    /** "OKVB". */
    public static final int MAGIC = 0x4F4B5642;
    public static final int HEADER_BYTES = 8;
    public static final int NONCE_BYTES = 32;
    public static final int MAC_BYTES = 32;

    public static final int HELLO = 0x01;
    public static final int AUTH = 0x02;
    public static final int AUTH_OK = 0x03;
    public static final int BATCH_REQUEST = 0x10;
    public static final int PAGE = 0x20;
    public static final int PAGE_REFUSED = 0x21;
    public static final int ERROR = 0x7F;

    public static final int HELLO_BODY_BYTES = 4 + NONCE_BYTES;
    public static final int AUTH_BODY_BYTES = 4 + NONCE_BYTES + MAC_BYTES;
    public static final int AUTH_OK_BODY_BYTES = MAC_BYTES;
    public static final int ERROR_BODY_BYTES = 4;
    public static final int PAGE_REFUSED_BODY_BYTES = 12;
    public static final int REQUEST_FIXED_BYTES = 28;
    public static final int REQUEST_PAGE_BYTES = StateKey.BYTES + NamespaceDigest.BYTES + 1 + 8 + 8;
    public static final int MAX_NODE_ID_BYTES = 128;
    public static final int PAGE_HEADER_BYTES = 24;
    public static final int TRAILER_BYTES = 4;

    private BulkLayout() {
    }

    /** ERROR codes. */
    public enum ErrorCode {
        MALFORMED(1), UNSUPPORTED_VERSION(2), AUTH_FAILED(3), BUSY(4);

        final int code;

        ErrorCode(int code) {
            this.code = code;
        }

        static ErrorCode of(int code) {
            for (ErrorCode e : values()) if (e.code == code) return e;
            return MALFORMED;
        }
    }

    /** A decode that failed: the connection is closed and the reason counted. */
    public record Malformed(String reason) implements HeaderDecode, BodyDecode {
        public Malformed {
            Objects.requireNonNull(reason, "reason");
        }
    }

    /** Result of {@link #decodeHeader}. */
    public sealed interface HeaderDecode permits Header, Malformed {}

    /** Result of a body decode. */
    public sealed interface BodyDecode permits BatchRequest, PageHeader, PageRefused, Hello, Auth, AuthOk, ErrorFrame, Malformed {}

    /** A frame header whose type is known and whose body length fits that type's limit. */
    public record Header(int type, int bodyBytes) implements HeaderDecode {}

    public record Hello(byte[] serverNonce) implements BodyDecode {
        public Hello {
            if (serverNonce.length != NONCE_BYTES) throw new IllegalArgumentException("nonce");
        }

        public ByteBuffer encode() {
            ByteBuffer b = frame(HELLO, HELLO_BODY_BYTES);
            b.putInt(MAGIC).put(serverNonce);
            return b.flip();
        }
    }

    public record Auth(byte[] clientNonce, byte[] mac) implements BodyDecode {
        public Auth {
            if (clientNonce.length != NONCE_BYTES || mac.length != MAC_BYTES) throw new IllegalArgumentException("nonce/mac");
        }

        public ByteBuffer encode() {
            ByteBuffer b = frame(AUTH, AUTH_BODY_BYTES);
            b.putInt(MAGIC).put(clientNonce).put(mac);
            return b.flip();
        }
    }

    public record AuthOk(byte[] mac) implements BodyDecode {
        public AuthOk {
            if (mac.length != MAC_BYTES) throw new IllegalArgumentException("mac");
        }

        public ByteBuffer encode() {
            ByteBuffer b = frame(AUTH_OK, AUTH_OK_BODY_BYTES);
            b.put(mac);
            return b.flip();
        }
    }

    public record ErrorFrame(ErrorCode code) implements BodyDecode {
        public ByteBuffer encode() {
            ByteBuffer b = frame(ERROR, ERROR_BODY_BYTES);
            b.putShort((short) code.code).putShort((short) 0);
            return b.flip();
        }
    }

    /** One page a batch asks for. */
    public record PageAsk(StateKey key, NamespaceDigest namespace, PeerMedium medium, long generation, long residencySequence) {
        public PageAsk {
            Objects.requireNonNull(key, "key");
            Objects.requireNonNull(namespace, "namespace");
            Objects.requireNonNull(medium, "medium");
            if (generation < 0) throw new IllegalArgumentException("generation: " + generation);
            if (residencySequence <= 0) throw new IllegalArgumentException("residencySequence: " + residencySequence);
        }

        public static PageAsk of(AuthorizeRequest r) {
            return new PageAsk(r.key(), r.namespace(), r.medium(), r.generation(), r.residencySequence());
        }
    }

    /** BATCH_REQUEST: every page of one batch from one source. */
    public record BatchRequest(long batchId, NodeIncarnation requester, long sourceIncarnation, List<PageAsk> pages)
            implements BodyDecode {
        public BatchRequest {
            Objects.requireNonNull(requester, "requester");
            pages = List.copyOf(pages);
            if (pages.isEmpty() || pages.size() > BulkLimits.WIRE_MAX_PAGES) throw new IllegalArgumentException("pages: " + pages.size());
            if (sourceIncarnation <= 0) throw new IllegalArgumentException("sourceIncarnation: " + sourceIncarnation);
            if (requester.nodeId().getBytes(StandardCharsets.UTF_8).length > MAX_NODE_ID_BYTES) {
                throw new IllegalArgumentException("node id longer than " + MAX_NODE_ID_BYTES + " bytes");
            }
        }

        /** The request of page {@code index} as the source's {@code PeerSource.authorize} takes it. */
        public AuthorizeRequest authorizeRequest(int index) {
            PageAsk p = pages.get(index);
            return new AuthorizeRequest(requester, sourceIncarnation, p.key(), p.namespace(), p.medium(), p.generation(),
                    p.residencySequence());
        }

        public ByteBuffer encode() {
            byte[] id = requester.nodeId().getBytes(StandardCharsets.UTF_8);
            int body = REQUEST_FIXED_BYTES + id.length + pages.size() * REQUEST_PAGE_BYTES;
            ByteBuffer b = frame(BATCH_REQUEST, body);
            b.putLong(batchId).putLong(sourceIncarnation).putLong(requester.incarnation())
                    .putShort((short) pages.size()).put((byte) id.length).put((byte) 0).put(id);
            MemorySegment s = MemorySegment.ofArray(new byte[StateKey.BYTES + NamespaceDigest.BYTES]);
            for (PageAsk p : pages) {
                p.key().write(s, 0);
                p.namespace().write(s, StateKey.BYTES);
                b.put(s.asByteBuffer());
                b.put(mediumCode(p.medium())).putLong(p.generation()).putLong(p.residencySequence());
            }
            return b.flip();
        }
    }

    /** The fixed part of a PAGE frame; {@code lengthBytes} of payload and the CRC32C trailer follow. */
    public record PageHeader(long batchId, int index, int lengthBytes, long ticketId) implements BodyDecode {
        public PageHeader {
            if (index < 0 || index > BulkLimits.WIRE_MAX_PAGES) throw new IllegalArgumentException("index: " + index);
            if (lengthBytes <= 0) throw new IllegalArgumentException("lengthBytes: " + lengthBytes);
            if (ticketId <= 0) throw new IllegalArgumentException("ticketId: " + ticketId);
        }

        /** The frame header and this page header (32 bytes); the caller writes payload and trailer. */
        public ByteBuffer encode() {
            ByteBuffer b = frame(PAGE, PAGE_HEADER_BYTES + lengthBytes + TRAILER_BYTES, PAGE_HEADER_BYTES);
            b.putLong(batchId).putShort((short) index).putShort((short) 0).putInt(lengthBytes).putLong(ticketId);
            return b.flip();
        }
    }

    /** PAGE_REFUSED: page {@code index} gets no payload, for {@code reason}. */
    public record PageRefused(long batchId, int index, Rejection reason) implements BodyDecode {
        public PageRefused {
            Objects.requireNonNull(reason, "reason");
            if (index < 0 || index > BulkLimits.WIRE_MAX_PAGES) throw new IllegalArgumentException("index: " + index);
        }

        public ByteBuffer encode() {
            ByteBuffer b = frame(PAGE_REFUSED, PAGE_REFUSED_BODY_BYTES);
            b.putLong(batchId).putShort((short) index).put(rejectionCode(reason)).put((byte) 0);
            return b.flip();
        }
    }

    private static ByteBuffer frame(int type, int bodyBytes) {
        return frame(type, bodyBytes, bodyBytes);
    }

    private static ByteBuffer frame(int type, int bodyBytes, int allocateBodyBytes) {
        ByteBuffer b = ByteBuffer.allocate(HEADER_BYTES + allocateBodyBytes).order(ByteOrder.BIG_ENDIAN);
        b.put((byte) type).put((byte) VERSION).putShort((short) 0).putInt(bodyBytes);
        return b;
    }

    /**
     * Decodes a frame header (8 bytes from position) and checks its body length against the
     * type's limit: fixed-size frames must match exactly, a BATCH_REQUEST is at most
     * {@link BulkLimits#maxRequestBodyBytes()}, a PAGE at most {@code maxPageBytes} of payload.
     */
    public static HeaderDecode decodeHeader(ByteBuffer b, BulkLimits limits) {
        if (b.remaining() < HEADER_BYTES) return new Malformed("short header");
        int type = b.get() & 0xFF;
        int version = b.get() & 0xFF;
        int flags = b.getShort() & 0xFFFF;
        long body = b.getInt() & 0xFFFF_FFFFL;
        if (version != VERSION) return new Malformed("unsupported version " + version);
        if (flags != 0) return new Malformed("flags " + flags);
        long max = switch (type) {
            case HELLO -> HELLO_BODY_BYTES;
            case AUTH -> AUTH_BODY_BYTES;
            case AUTH_OK -> AUTH_OK_BODY_BYTES;
            case ERROR -> ERROR_BODY_BYTES;
            case PAGE_REFUSED -> PAGE_REFUSED_BODY_BYTES;
            case BATCH_REQUEST -> limits.maxRequestBodyBytes();
            case PAGE -> (long) PAGE_HEADER_BYTES + limits.maxPageBytes() + TRAILER_BYTES;
            default -> -1;
        };
        if (max < 0) return new Malformed("unknown frame type " + type);
        boolean fixed = type != BATCH_REQUEST && type != PAGE;
        if (fixed ? body != max : body > max) return new Malformed("frame type " + type + " with " + body + " body bytes");
        if (type == PAGE && body <= PAGE_HEADER_BYTES + TRAILER_BYTES) return new Malformed("empty page");
        if (type == BATCH_REQUEST && body < REQUEST_FIXED_BYTES + 1 + REQUEST_PAGE_BYTES) return new Malformed("short request");
        return new Header(type, (int) body);
    }

    /** Decodes a fixed-size control body (HELLO, AUTH, AUTH_OK, ERROR, PAGE_REFUSED) of {@code header}. */
    public static BodyDecode decodeControl(Header header, ByteBuffer body) {
        if (body.remaining() != header.bodyBytes()) return new Malformed("body length");
        return switch (header.type()) {
            case HELLO -> body.getInt() != MAGIC ? new Malformed("magic") : new Hello(bytes(body, NONCE_BYTES));
            case AUTH -> body.getInt() != MAGIC ? new Malformed("magic")
                    : new Auth(bytes(body, NONCE_BYTES), bytes(body, MAC_BYTES));
            case AUTH_OK -> new AuthOk(bytes(body, MAC_BYTES));
            case ERROR -> {
                int code = body.getShort() & 0xFFFF;
                yield body.getShort() != 0 ? new Malformed("error reserved bits") : new ErrorFrame(ErrorCode.of(code));
            }
            case PAGE_REFUSED -> {
                long batchId = body.getLong();
                int index = body.getShort() & 0xFFFF;
                Rejection reason = rejection(body.get() & 0xFF);
                if (body.get() != 0) yield new Malformed("page refused reserved bits");
                yield reason == null ? new Malformed("unknown refusal code") : new PageRefused(batchId, index, reason);
            }
            default -> new Malformed("not a control frame: " + header.type());
        };
    }

    /** Decodes the 24-byte fixed part of a PAGE body announced as {@code bodyBytes} long. */
    public static BodyDecode decodePageHeader(int bodyBytes, ByteBuffer b) {
        if (b.remaining() < PAGE_HEADER_BYTES) return new Malformed("short page header");
        long batchId = b.getLong();
        int index = b.getShort() & 0xFFFF;
        int reserved = b.getShort() & 0xFFFF;
        long length = b.getInt() & 0xFFFF_FFFFL;
        long ticketId = b.getLong();
        if (reserved != 0) return new Malformed("page reserved bits");
        if (length == 0 || length + PAGE_HEADER_BYTES + TRAILER_BYTES != bodyBytes) return new Malformed("page length " + length);
        if (ticketId <= 0) return new Malformed("ticket id");
        return new PageHeader(batchId, index, (int) length, ticketId);
    }

    /** Decodes a BATCH_REQUEST body of {@code bodyBytes} (already checked against the limit). */
    public static BodyDecode decodeRequest(ByteBuffer b, BulkLimits limits) {
        int bodyBytes = b.remaining();
        if (bodyBytes < REQUEST_FIXED_BYTES) return new Malformed("short request");
        long batchId = b.getLong();
        long sourceIncarnation = b.getLong();
        long requesterIncarnation = b.getLong();
        int count = b.getShort() & 0xFFFF;
        int idLength = b.get() & 0xFF;
        int reserved = b.get() & 0xFF;
        if (reserved != 0) return new Malformed("request reserved bits");
        if (count < 1 || count > limits.maxPagesPerBatch()) return new Malformed("page count " + count);
        if (idLength < 1 || idLength > MAX_NODE_ID_BYTES) return new Malformed("node id length " + idLength);
        if ((long) REQUEST_FIXED_BYTES + idLength + (long) count * REQUEST_PAGE_BYTES != bodyBytes) {
            return new Malformed("request length " + bodyBytes + " for " + count + " pages");
        }
        if (sourceIncarnation <= 0 || requesterIncarnation <= 0) return new Malformed("incarnation");
        String nodeId;
        try {
            // strict: a lenient decode turns bad bytes into U+FFFD, naming a node the peer never sent
            nodeId = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(bytes(b, idLength))).toString();
        } catch (CharacterCodingException e) {
            return new Malformed("node id is not UTF-8");
        }
        if (nodeId.isEmpty() || nodeId.length() > 128) return new Malformed("node id");
        List<PageAsk> pages = new ArrayList<>(count);
        byte[] keyAndNs = new byte[StateKey.BYTES + NamespaceDigest.BYTES];
        MemorySegment s = MemorySegment.ofArray(keyAndNs);
        for (int i = 0; i < count; i++) {
            b.get(keyAndNs);
            PeerMedium medium = medium(b.get() & 0xFF);
            long generation = b.getLong();
            long sequence = b.getLong();
            if (medium == null) return new Malformed("medium of page " + i);
            if (generation < 0 || sequence <= 0) return new Malformed("generation or sequence of page " + i);
            pages.add(new PageAsk(StateKey.read(s, 0), NamespaceDigest.read(s, StateKey.BYTES), medium, generation, sequence));
        }
        return new BatchRequest(batchId, new NodeIncarnation(nodeId, requesterIncarnation), sourceIncarnation, pages);
    }

    private static byte[] bytes(ByteBuffer b, int n) {
        byte[] out = new byte[n];
        b.get(out);
        return out;
    }

    static byte mediumCode(PeerMedium m) {
        return switch (m) {
            case DRAM -> 1;
            case SSD -> 2;
        };
    }

    static PeerMedium medium(int code) {
        return switch (code) {
            case 1 -> PeerMedium.DRAM;
            case 2 -> PeerMedium.SSD;
            default -> null;
        };
    }

    /** Refusal codes on the wire (explicit, never an ordinal). */
    static byte rejectionCode(Rejection r) {
        return switch (r) {
            case STALE_SOURCE_INCARNATION -> 1;
            case STALE_REQUESTER_INCARNATION -> 2;
            case SEQUENCE_AHEAD -> 3;
            case NAMESPACE_MISMATCH -> 4;
            case GENERATION_GONE -> 5;
            case SOURCE_BUSY -> 6;
            case TICKET_TABLE_FULL -> 7;
            case NOT_SERVING -> 8;
            case UNREACHABLE -> 9;
        };
    }

    static Rejection rejection(int code) {
        for (Rejection r : Rejection.values()) if (rejectionCode(r) == code) return r;
        return null;
    }
}
