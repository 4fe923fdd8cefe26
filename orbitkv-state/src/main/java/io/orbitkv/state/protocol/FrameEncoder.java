package io.orbitkv.state.protocol;

import io.orbitkv.state.RecoveryContractEncoding;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * Encodes a {@link Frame} and its request id into the wire form of {@code docs/protocol.md}
 * ({@link FrameLayout} header, then the body fields in record-component order, little-endian).
 *
 * <p>Stateless and thread-safe. A frame is always encoded whole before it is handed out, which is
 * what the publication rule needs. It does not check {@link ProtocolLimits}: a sender that may
 * exceed the peer's {@code maxFrameBytes} checks {@code toBytes(...).length} itself.
 *
 * <p>Design note: the body is built in a {@link WireWriter} and then copied behind the header, so
 * each layout is written once, in one switch; see {@link WireWriter} for the cost.
 */
public final class FrameEncoder {

    private FrameEncoder() {
    }

    /**
     * The whole frame, header included.
     *
     * @throws IllegalArgumentException if {@code requestId} is not allowed for the type: 0 for
     *         COMPLETION, non-zero for every other type except ERROR (any id)
     */
    public static byte[] toBytes(long requestId, Frame frame) {
        Objects.requireNonNull(frame, "frame");
        if (!requestIdAllowed(frame.type(), requestId)) {
            throw new IllegalArgumentException(frame.type() + " cannot travel under request id " + Long.toUnsignedString(requestId));
        }
        WireWriter w = new WireWriter(sizeHint(frame));
        w.u32(0).u16(FrameLayout.VERSION).u16(frame.type().code()).u64(requestId);
        writeBody(frame, w);
        byte[] out = Arrays.copyOf(w.array(), w.size());
        ByteBuffer.wrap(out).order(ByteOrder.LITTLE_ENDIAN).putInt(FrameLayout.LENGTH_OFFSET, out.length);
        return out;
    }

    /** Writes the frame at {@code out}'s position and advances it; returns the bytes written. */
    public static int encode(long requestId, Frame frame, ByteBuffer out) {
        byte[] bytes = toBytes(requestId, frame);
        out.put(bytes);
        return bytes.length;
    }

    /** Writes the frame at {@code offset} of {@code segment}; returns the bytes written. */
    public static int encode(long requestId, Frame frame, MemorySegment segment, long offset) {
        byte[] bytes = toBytes(requestId, frame);
        MemorySegment.copy(MemorySegment.ofArray(bytes), 0, segment, offset, bytes.length);
        return bytes.length;
    }

    /**
     * An upper estimate of the frame's bytes for the frames that can be large (QUERY, PREPARE,
     * QUERY_RESULT), so the writer grows at most once instead of doubling seven times from 256
     * bytes to a 32 KiB QUERY; 256 for the rest.
     */
    private static int sizeHint(Frame frame) {
        long bytes = switch (frame) {
            case Request.Query q -> FrameLayout.HEADER_BYTES + 40 + groupBytes(q.groups());
            case Request.Prepare p -> FrameLayout.HEADER_BYTES + 32 + groupBytes(p.groups());
            case Request.Hint h -> FrameLayout.HEADER_BYTES + 8 + groupBytes(h.groups());
            case Request.Contains c -> FrameLayout.HEADER_BYTES + 4 + groupBytes(c.groups());
            case Reply.Contained c -> FrameLayout.HEADER_BYTES + 8 + c.locations().size();
            case Reply.QueryResult r -> FrameLayout.HEADER_BYTES + 24 + 8L * r.groups().size()
                    + 12L * Reply.MAX_SPANS_PER_GROUP * r.groups().size() + 17 * r.pageCount();
            default -> 256;
        };
        return (int) Math.min(bytes, 1 << 26);
    }

    private static long groupBytes(List<Request.QueryGroup> groups) {
        long n = 0;
        for (Request.QueryGroup g : groups) n += 12 + (long) g.hashes().count() * g.hashes().width();
        return n;
    }

    /** The request id rule of the header: COMPLETION 0, ERROR any, every other type non-zero. */
    static boolean requestIdAllowed(FrameType type, long requestId) {
        if (type == FrameType.COMPLETION) return requestId == FrameLayout.NO_REQUEST;
        return type == FrameType.ERROR || requestId != FrameLayout.NO_REQUEST;
    }

    private static void writeBody(Frame frame, WireWriter w) {
        switch (frame) {
            case Request r -> writeRequest(r, w);
            case Reply r -> writeReply(r, w);
        }
    }

    private static void writeRequest(Request request, WireWriter w) {
        switch (request) {
            case Request.Register r -> {
                w.u64(r.epoch()).string16(r.instanceId());
                w.blob32(r.namespace().canonicalBytes());
                w.blob32(RecoveryContractEncoding.canonicalBytes(r.contract()));
            }
            case Request.RegisterRegion r -> {
                w.u64(r.sizeBytes()).u32(r.pageBytes()).u32(r.pageCount()).u8(r.source().code()).u8(0);
                switch (r.source()) {
                    case Request.FromPath p -> w.string16(p.path());
                    case Request.FromDescriptor d -> w.bytes(d.handle().bytes());
                }
            }
            case Request.Query q -> {
                w.u64(q.operationId()).u32(q.revision()).u8(q.target().code()).u8(0).u16(q.groups().size());
                w.u64(q.promptTokens()).u64(q.originTokens()).u32(q.prefillTokensPerSecond()).u32(q.peerWaitMillis());
                writeGroups(q.groups(), w);
            }
            case Request.QueryPoll p -> w.u64(p.operationId()).u32(p.revision());
            case Request.Cancel c -> w.u64(c.operationId());
            case Request.PublishReserve p -> {
                w.u32(p.pages().size());
                for (Request.PublishPage page : p.pages()) {
                    w.u32(page.groupId()).u32(page.lengthBytes()).u8(page.form().code()).u8(page.name().width());
                    page.name().writeTo(w);
                }
                p.tenant().ifPresent(w::string16);
            }
            case Request.PublishCommit c -> writeIds(c.reservationIds(), w);
            case Request.PublishAbort a -> writeIds(a.reservationIds(), w);
            case Request.Restore r -> {
                w.u64(r.operationId()).u32(r.regionId()).u32(r.pages().size());
                for (Request.RestorePage p : r.pages()) w.u32(p.groupId()).u32(p.destinationPage()).u64(p.sourcePage());
            }
            case Request.Release r -> w.u64(r.operationId());
            case Request.Stats s -> {
                // empty body
            }
            case Request.Prepare p -> {
                w.u64(p.operationId()).u32(p.firstUseMillis()).u8(p.priority()).u8(0).u16(p.groups().size());
                w.u64(p.promptTokens()).u64(p.originTokens());
                writeGroups(p.groups(), w);
            }
            case Request.Hint h -> {
                w.u8(h.kind().code()).u8(0).u16(h.groups().size()).u32(h.durationMillis());
                writeGroups(h.groups(), w);
            }
            case Request.Contains c -> {
                w.u16(c.groups().size()).u16(0);
                writeGroups(c.groups(), w);
            }
        }
    }

    private static void writeReply(Reply reply, WireWriter w) {
        switch (reply) {
            case Reply.Registered r -> {
                w.u64(r.incarnationId()).u64(r.epoch());
                for (int v : r.limits().toArray()) w.u32(v);
                w.u16(r.arenas().size()).u16(0).bytes(r.ticket().bytes()).string16(r.descriptorSocket());
                for (Reply.ArenaFile a : r.arenas()) w.u64(a.sizeBytes()).u32(a.slotBytes());
            }
            case Reply.RegionRegistered r -> w.u32(r.regionId());
            case Reply.QueryResult q -> writeQueryResult(q, w);
            case Reply.Cancelled c -> w.u64(c.operationId()).u8(c.drained() ? 1 : 0).u8(0).u16(0).u32(c.pagesReleased());
            case Reply.Released r -> w.u64(r.operationId()).u8(r.drained() ? 1 : 0).u8(0).u16(0).u32(r.pagesReleased());
            case Reply.Reserved r -> {
                w.u32(r.outcomes().size());
                for (Reply.ReserveOutcome o : r.outcomes()) {
                    switch (o) {
                        case Reply.Granted g -> w.u8(FrameDecoder.GRANTED).u64(g.reservationId()).u32(g.arenaIndex()).u64(g.offsetBytes());
                        case Reply.Refused f -> w.u8(f.reason().code());
                    }
                }
            }
            case Reply.Committed c -> {
                w.u32(c.outcomes().size());
                for (SettleOutcome o : c.outcomes()) w.u8(o.code());
            }
            case Reply.Aborted a -> {
                w.u32(a.outcomes().size());
                for (SettleOutcome o : a.outcomes()) w.u8(o.code());
            }
            case Reply.RestoreAccepted r -> w.u64(r.operationId()).u32(r.pageCount());
            case Reply.StatsReply s -> {
                w.u16(s.counters().size()).u16(0);
                for (Reply.Counter c : s.counters()) w.u64(c.value()).string16(c.name());
            }
            case Reply.Prepared p -> w.u64(p.operationId()).u8(p.outcome().code()).u8(0).u16(0).u32(p.pagesToStage())
                    .u32(p.pagesResident()).u32(p.startDelayMillis()).u64(p.bytesToStage());
            case Reply.Hinted h -> w.u8(h.kind().code()).u8(0).u16(0).u32(h.applied()).u32(h.notResident())
                    .u32(h.refusedBudget());
            case Reply.Contained c -> {
                w.u32(c.locations().size()).u8(c.peers() ? 1 : 0).u8(0).u16(0);
                for (PageLocation l : c.locations()) w.u8(l.code());
            }
            case Reply.Completion c -> {
                w.u64(c.operationId()).u32(c.revision()).u8(c.event().code());
                switch (c.outcome()) {
                    case Reply.Settled s -> w.u8(switch (s) {
                        case OK -> FrameDecoder.OUTCOME_OK;
                        case CANCELLED -> FrameDecoder.OUTCOME_CANCELLED;
                    }).u16(0);
                    case Reply.Failed f -> w.u8(FrameDecoder.OUTCOME_FAILED).u16(f.error().code());
                }
            }
            case Reply.Error e -> w.u16(e.code().code()).string16(e.message());
        }
    }

    private static void writeQueryResult(Reply.QueryResult q, WireWriter w) {
        w.u64(q.operationId()).u32(q.revision()).u8(q.status().code()).u8(q.hit() ? 1 : 0).u16(q.groups().size());
        w.u64(q.boundaryTokens());
        for (Reply.GroupResult g : q.groups()) {
            w.u32(g.groupId()).u16(g.spans().size()).u16(0);
            for (Reply.Span s : g.spans()) {
                PageEntries e = s.entries();
                w.u64(s.firstPage()).u32(e.size());
                for (int i = 0; i < e.size(); i++) {
                    if (e.isResident(i)) {
                        w.u8(PageState.RESIDENT.code()).u32(e.arenaIndex(i)).u64(e.offsetBytes(i)).u32(e.lengthBytes(i));
                    } else {
                        w.u8(e.state(i).code());
                    }
                }
            }
        }
    }

    /** The page-name groups of a QUERY, PREPARE or HINT: each group's header, then its hashes. */
    private static void writeGroups(List<Request.QueryGroup> groups, WireWriter w) {
        for (Request.QueryGroup g : groups) {
            w.u32(g.groupId()).u8(g.form().code()).u8(g.hashes().width()).u16(0).u32(g.hashes().count());
            g.hashes().writeTo(w);
        }
    }

    private static void writeIds(List<Long> ids, WireWriter w) {
        w.u32(ids.size());
        for (long id : ids) w.u64(id);
    }
}
