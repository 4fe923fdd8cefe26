package io.orbitkv.state.protocol;

import io.orbitkv.state.ContractDecoding;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.NamespaceDecoding;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.RecoveryContractEncoding;
import io.orbitkv.state.StateKeys;
import io.orbitkv.state.protocol.WireReader.BadFrame;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Objects;

/**
 * Incremental decoder of the engine channel: looks at the front of a receive buffer and says
 * whether it holds a whole valid frame ({@link DecodeResult.Decoded}), needs more bytes
 * ({@link DecodeResult.NeedBytes}) or is not a valid frame ({@link DecodeResult.Malformed}).
 *
 * <p>Immutable (limits and direction are fixed at construction) and thread-safe; each call reads
 * only its argument. Guarantees, for any input bytes:
 * <ul>
 *   <li>it never throws and never moves the buffer's position (the caller advances it by
 *       {@code bytesConsumed} or {@code skipBytes});</li>
 *   <li>a frame length below 16 or above {@code maxFrameBytes} is refused from its first 4 bytes,
 *       before anything is buffered for it (not skippable: the stream cannot be trusted);</li>
 *   <li>every proper prefix of a valid frame is NeedBytes;</li>
 *   <li>nothing is allocated for a declared count or length before it has been checked against
 *       its {@link ProtocolLimits} budget and against the bytes actually in the frame, so memory
 *       is bounded by {@code maxFrameBytes} plus the frame's objects;</li>
 *   <li>unknown version or type, a type of the other direction, a bad request id, a count over a
 *       budget, trailing bytes and internally inconsistent values (record invariants) are
 *       refused as skippable: the frame's extent is known.</li>
 * </ul>
 *
 * <p>Design note: a refusal is a value and the body parser signals it with a stackless
 * exception caught in {@link #decode}, rather than threading a result through forty field reads;
 * only {@link BadFrame} and the records' {@link IllegalArgumentException} are caught, so a bug
 * in the decoder still surfaces (the Jazzer test would report it).
 */
public final class FrameDecoder {

    /** Reserve-entry outcome code of a granted slot (refusals use {@link Refusal} codes). */
    static final int GRANTED = 1;
    static final int OUTCOME_OK = 1;
    static final int OUTCOME_CANCELLED = 2;
    static final int OUTCOME_FAILED = 3;

    private final ProtocolLimits limits;
    private final Direction accepting;

    /** A decoder of frames travelling {@code accepting} (the Manager accepts TO_MANAGER). */
    public FrameDecoder(ProtocolLimits limits, Direction accepting) {
        this.limits = Objects.requireNonNull(limits, "limits");
        this.accepting = Objects.requireNonNull(accepting, "accepting");
    }

    /** The budgets this decoder enforces. */
    public ProtocolLimits limits() {
        return limits;
    }

    /**
     * Decodes from the start of {@code segment} (e.g. the filled part of a receive segment); it is
     * not modified. Only the first {@code maxFrameBytes} bytes are looked at: no legal frame is longer.
     */
    public DecodeResult decode(MemorySegment segment) {
        return decode(segment.asSlice(0, Math.min(segment.byteSize(), limits.maxFrameBytes())).asByteBuffer());
    }

    /** Decodes from {@code buffer}'s position to its limit; the buffer is not modified. */
    public DecodeResult decode(ByteBuffer buffer) {
        ByteBuffer in = buffer.duplicate().order(ByteOrder.LITTLE_ENDIAN);
        int available = in.remaining();
        if (available < 4) return new DecodeResult.NeedBytes(4 - available);
        int start = in.position();
        long length = Integer.toUnsignedLong(in.getInt(start + FrameLayout.LENGTH_OFFSET));
        if (length < FrameLayout.HEADER_BYTES) {
            return new DecodeResult.Malformed(ErrorCode.MALFORMED, "frame length " + length + " is below the "
                    + FrameLayout.HEADER_BYTES + "-byte header", FrameLayout.NO_REQUEST, 0);
        }
        if (length > limits.maxFrameBytes()) {
            return new DecodeResult.Malformed(ErrorCode.TOO_LARGE, "frame length " + length + " exceeds maxFrameBytes "
                    + limits.maxFrameBytes(), FrameLayout.NO_REQUEST, 0);
        }
        int frameBytes = (int) length;
        if (available < frameBytes) return new DecodeResult.NeedBytes(frameBytes - available);
        long requestId = in.getLong(start + FrameLayout.REQUEST_ID_OFFSET);
        int version = Short.toUnsignedInt(in.getShort(start + FrameLayout.VERSION_OFFSET));
        if (version != FrameLayout.VERSION) {
            return new DecodeResult.Malformed(ErrorCode.UNSUPPORTED_VERSION, "version " + version + " is not "
                    + FrameLayout.VERSION, requestId, frameBytes);
        }
        int typeCode = Short.toUnsignedInt(in.getShort(start + FrameLayout.TYPE_OFFSET));
        FrameType type = FrameType.ofCode(typeCode).orElse(null);
        if (type == null || type.direction() != accepting) {
            return new DecodeResult.Malformed(ErrorCode.UNKNOWN_OPERATION, String.format("frame type 0x%04x %s", typeCode,
                    type == null ? "is unknown" : "does not travel " + accepting), requestId, frameBytes);
        }
        if (!FrameEncoder.requestIdAllowed(type, requestId)) {
            return new DecodeResult.Malformed(ErrorCode.MALFORMED, type + " cannot carry request id "
                    + Long.toUnsignedString(requestId), requestId, frameBytes);
        }
        WireReader body = new WireReader(in.slice(start + FrameLayout.HEADER_BYTES, frameBytes - FrameLayout.HEADER_BYTES));
        try {
            Frame frame = readBody(type, body);
            body.requireEnd();
            return new DecodeResult.Decoded(requestId, frame, frameBytes);
        } catch (BadFrame e) {
            return new DecodeResult.Malformed(e.code, type + ": " + e.getMessage(), requestId, frameBytes);
        } catch (IllegalArgumentException e) {
            return new DecodeResult.Malformed(ErrorCode.MALFORMED, type + " is inconsistent: " + e.getMessage(),
                    requestId, frameBytes);
        }
    }

    private Frame readBody(FrameType type, WireReader r) {
        return switch (type) {
            case REGISTER -> readRegister(r);
            case REGISTER_REGION -> {
                long size = r.u63("size_bytes");
                int pageBytes = r.u31("page_bytes");
                int pageCount = r.u31("page_count");
                int form = r.u8("source");
                r.zero8("pad");
                Request.RegionSource source = switch (form) {
                    case Request.FromPath.CODE -> new Request.FromPath(r.string16("path", 1, limits.maxStringBytes()));
                    case Request.FromDescriptor.CODE ->
                            new Request.FromDescriptor(DescriptorTicket.of(r.bytes(DescriptorTicket.BYTES, "handle")));
                    default -> throw WireReader.malformed("unknown region source " + form);
                };
                yield new Request.RegisterRegion(source, size, pageBytes, pageCount);
            }
            case QUERY -> readQuery(r);
            case QUERY_POLL -> new Request.QueryPoll(r.u63("operation_id"), r.u31("revision"));
            case CANCEL -> new Request.Cancel(r.u63("operation_id"));
            case PUBLISH_RESERVE -> readPublishReserve(r);
            case PUBLISH_COMMIT -> new Request.PublishCommit(readIds(r));
            case PUBLISH_ABORT -> new Request.PublishAbort(readIds(r));
            case RESTORE -> readRestore(r);
            case RELEASE -> new Request.Release(r.u63("operation_id"));
            case STATS -> new Request.Stats();
            case PREPARE -> readPrepare(r);
            case HINT -> readHint(r);
            case CONTAINS -> readContains(r);
            case REGISTERED -> readRegistered(r);
            case REGION_REGISTERED -> new Reply.RegionRegistered(r.u31("region_id"));
            case QUERY_RESULT -> QueryResultReader.read(r, limits);
            case CANCELLED -> {
                long op = r.u63("operation_id");
                boolean drained = r.flag("drained");
                r.zero8("pad");
                r.zero16("pad");
                yield new Reply.Cancelled(op, drained, r.u31("pages_released"));
            }
            case RELEASED -> {
                long op = r.u63("operation_id");
                boolean drained = r.flag("drained");
                r.zero8("pad");
                r.zero16("pad");
                yield new Reply.Released(op, drained, r.u31("pages_released"));
            }
            case RESERVED -> readReserved(r);
            case COMMITTED -> new Reply.Committed(readSettleOutcomes(r));
            case ABORTED -> new Reply.Aborted(readSettleOutcomes(r));
            case RESTORE_ACCEPTED -> new Reply.RestoreAccepted(r.u63("operation_id"), r.u31("page_count"));
            case STATS_REPLY -> readStats(r);
            case PREPARED -> {
                long op = r.u63("operation_id");
                Reply.PrepareOutcome outcome = code(Reply.PrepareOutcome.class, r.u8("outcome"), "outcome");
                r.zero8("pad");
                r.zero16("pad");
                yield new Reply.Prepared(op, outcome, r.u31("pages_to_stage"), r.u31("pages_resident"),
                        r.u31("start_delay_millis"), r.u63("bytes_to_stage"));
            }
            case HINTED -> {
                HintKind kind = code(HintKind.class, r.u8("kind"), "kind");
                r.zero8("pad");
                r.zero16("pad");
                int applied = r.u31("applied");
                int notResident = r.u31("not_resident");
                yield new Reply.Hinted(kind, applied, notResident, r.u31("refused_budget"));
            }
            case CONTAINED -> readContained(r);
            case COMPLETION -> readCompletion(r);
            case ERROR -> {
                int code = r.u16("error_code");
                ErrorCode error = ErrorCode.ofCode(code)
                        .orElseThrow(() -> WireReader.malformed("unknown error code " + code));
                yield new Reply.Error(error, r.string16("message", 0, limits.maxStringBytes()));
            }
        };
    }

    private Request.Register readRegister(WireReader r) {
        long epoch = r.u63("epoch");
        String instance = r.string16("instance_id", 1, Request.MAX_INSTANCE_ID_BYTES);
        byte[] ns = r.blob32("namespace", Namespace.MAX_ENCODED_BYTES);
        Namespace namespace = switch (Namespace.decode(ns)) {
            case NamespaceDecoding.Decoded(Namespace n) -> n;
            case NamespaceDecoding.Malformed(String reason) -> throw WireReader.malformed("namespace: " + reason);
        };
        byte[] rc = r.blob32("contract", RecoveryContractEncoding.MAX_ENCODED_BYTES);
        RecoveryContract contract = switch (RecoveryContractEncoding.decode(rc)) {
            case ContractDecoding.Decoded(RecoveryContract c) -> c;
            case ContractDecoding.Malformed(String reason) -> throw WireReader.malformed("contract: " + reason);
        };
        return new Request.Register(instance, epoch, namespace, contract);
    }

    private Request.Query readQuery(WireReader r) {
        long op = r.u63("operation_id");
        int revision = r.u31("revision");
        CompletionTarget target = code(CompletionTarget.class, r.u8("target"), "target");
        r.zero8("pad");
        int groupCount = readGroupCount(r);
        long prompt = r.u63("prompt_tokens");
        long origin = r.u63("origin_tokens");
        int prefillRate = r.u31("prefill_tokens_per_second");
        int peerWait = r.u31("peer_wait_millis");
        return new Request.Query(op, revision, target, prompt, origin, prefillRate, peerWait, readGroups(r, groupCount));
    }

    /** PREPARE: QUERY's demand (prompt, origin, groups) behind its own header (protocol §5.11). */
    private Request.Prepare readPrepare(WireReader r) {
        long op = r.u63("operation_id");
        int firstUse = r.u31("first_use_millis");
        int priority = r.u8("priority");
        r.zero8("pad");
        int groupCount = readGroupCount(r);
        long prompt = r.u63("prompt_tokens");
        long origin = r.u63("origin_tokens");
        return new Request.Prepare(op, firstUse, priority, prompt, origin, readGroups(r, groupCount));
    }

    private int readGroupCount(WireReader r) {
        return r.checkCount("group_count", r.u16("group_count"), limits.maxGroupsPerQuery(), "maxGroupsPerQuery", 12);
    }

    /** The {@code groupCount} page-name groups of a QUERY, PREPARE or HINT, their pages summed under {@code maxPagesPerQuery}. */
    private List<Request.QueryGroup> readGroups(WireReader r, int groupCount) {
        List<Request.QueryGroup> groups = new ArrayList<>(groupCount);
        long pages = 0;
        for (int i = 0; i < groupCount; i++) {
            int groupId = r.u31("group_id");
            KeyForm form = code(KeyForm.class, r.u8("key_form"), "key_form");
            int width = r.u8("hash_bytes");
            if (width < 1 || width > StateKeys.MAX_BLOCK_HASH_BYTES) {
                throw WireReader.malformed("hash_bytes must be 1.." + StateKeys.MAX_BLOCK_HASH_BYTES + ": " + width);
            }
            r.zero16("pad");
            long count = Integer.toUnsignedLong(r.u31("page_count"));
            pages += count;
            r.checkCount("pages of the frame", pages, limits.maxPagesPerQuery(), "maxPagesPerQuery", 0);
            int n = r.checkCount("page_count", count, Integer.MAX_VALUE, "", width);
            groups.add(new Request.QueryGroup(groupId, form, Hashes.adopt(width, r.bytes(n * width, "hashes"))));
        }
        return groups;
    }

    private Request.Hint readHint(WireReader r) {
        HintKind kind = code(HintKind.class, r.u8("kind"), "kind");
        r.zero8("pad");
        int groupCount = readGroupCount(r);
        int duration = r.u31("duration_millis");
        return new Request.Hint(kind, duration, readGroups(r, groupCount));
    }

    private Request.Contains readContains(WireReader r) {
        int groupCount = readGroupCount(r);
        r.zero16("pad");
        return new Request.Contains(readGroups(r, groupCount));
    }

    private Reply.Contained readContained(WireReader r) {
        int count = r.checkCount("page_count", r.u31("page_count"), limits.maxPagesPerQuery(), "maxPagesPerQuery", 1);
        boolean peers = r.flag("peers");
        r.zero8("pad");
        r.zero16("pad");
        List<PageLocation> locations = new ArrayList<>(count);
        for (int i = 0; i < count; i++) locations.add(code(PageLocation.class, r.u8("location"), "location"));
        return new Reply.Contained(peers, locations);
    }

    private Request.PublishReserve readPublishReserve(WireReader r) {
        int count = r.checkCount("page_count", r.u31("page_count"), limits.maxPagesPerPublish(), "maxPagesPerPublish", 11);
        List<Request.PublishPage> pages = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            int groupId = r.u31("group_id");
            int length = r.u31("length_bytes");
            KeyForm form = code(KeyForm.class, r.u8("key_form"), "key_form");
            int width = r.u8("hash_bytes");
            if (width < 1 || width > StateKeys.MAX_BLOCK_HASH_BYTES) {
                throw WireReader.malformed("hash_bytes must be 1.." + StateKeys.MAX_BLOCK_HASH_BYTES + ": " + width);
            }
            pages.add(new Request.PublishPage(groupId, form, Hashes.adopt(width, r.bytes(width, "hash")), length));
        }
        // The optional trailing tenant label: absent (nothing follows the entries) or 1..64 bytes.
        Optional<String> tenant = r.remaining() == 0 ? Optional.empty()
                : Optional.of(r.string16("tenant", 1, Request.MAX_TENANT_BYTES, ErrorCode.MALFORMED));
        return new Request.PublishReserve(pages, tenant);
    }

    private List<Long> readIds(WireReader r) {
        int count = r.checkCount("id_count", r.u31("id_count"), limits.maxIdsPerSettle(), "maxIdsPerSettle", 8);
        List<Long> ids = new ArrayList<>(count);
        for (int i = 0; i < count; i++) ids.add(r.u63("reservation_id"));
        return ids;
    }

    private Request.Restore readRestore(WireReader r) {
        long op = r.u63("operation_id");
        int region = r.u31("region_id");
        int count = r.checkCount("page_count", r.u31("page_count"), limits.maxPagesPerRestore(), "maxPagesPerRestore", 16);
        List<Request.RestorePage> pages = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            int groupId = r.u31("group_id");
            int destination = r.u31("destination_page");
            pages.add(new Request.RestorePage(groupId, r.u63("source_page"), destination));
        }
        return new Request.Restore(op, region, pages);
    }

    private Reply.Registered readRegistered(WireReader r) {
        long incarnation = r.u63("incarnation_id");
        long epoch = r.u63("epoch");
        int[] values = new int[ProtocolLimits.FIELDS];
        for (int i = 0; i < values.length; i++) values[i] = r.u31("limit " + i);
        ProtocolLimits peerLimits = ProtocolLimits.fromArray(values);
        int count = r.checkCount("arena_count", r.u16("arena_count"), limits.maxArenaFiles(), "maxArenaFiles", 12);
        r.zero16("pad");
        DescriptorTicket ticket = DescriptorTicket.of(r.bytes(DescriptorTicket.BYTES, "ticket"));
        String socket = r.string16("descriptor_socket", 1, Reply.Registered.MAX_SOCKET_PATH_BYTES);
        List<Reply.ArenaFile> arenas = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            long size = r.u63("size_bytes");
            arenas.add(new Reply.ArenaFile(size, r.u31("slot_bytes")));
        }
        return new Reply.Registered(incarnation, epoch, peerLimits, ticket, socket, arenas);
    }

    private Reply.Reserved readReserved(WireReader r) {
        int count = r.checkCount("outcome_count", r.u31("outcome_count"), limits.maxPagesPerPublish(), "maxPagesPerPublish", 1);
        List<Reply.ReserveOutcome> outcomes = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            int code = r.u8("outcome");
            if (code == GRANTED) {
                long id = r.u63("reservation_id");
                int arena = r.u31("arena_index");
                outcomes.add(new Reply.Granted(id, arena, r.u63("offset_bytes")));
            } else {
                outcomes.add(new Reply.Refused(code(Refusal.class, code, "outcome")));
            }
        }
        return new Reply.Reserved(outcomes);
    }

    private List<SettleOutcome> readSettleOutcomes(WireReader r) {
        int count = r.checkCount("outcome_count", r.u31("outcome_count"), limits.maxIdsPerSettle(), "maxIdsPerSettle", 1);
        List<SettleOutcome> outcomes = new ArrayList<>(count);
        for (int i = 0; i < count; i++) outcomes.add(code(SettleOutcome.class, r.u8("outcome"), "outcome"));
        return outcomes;
    }

    private Reply.StatsReply readStats(WireReader r) {
        int count = r.checkCount("counter_count", r.u16("counter_count"), limits.maxStatsCounters(), "maxStatsCounters", 11);
        r.zero16("pad");
        List<Reply.Counter> counters = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            long value = r.u63("value");
            counters.add(new Reply.Counter(r.string16("name", 1, 64), value));
        }
        return new Reply.StatsReply(counters);
    }

    private Reply.Completion readCompletion(WireReader r) {
        long op = r.u63("operation_id");
        int revision = r.u31("revision");
        CompletionEvent event = code(CompletionEvent.class, r.u8("event"), "event");
        int outcomeCode = r.u8("outcome");
        int errorCode = r.u16("error_code");
        Reply.Outcome outcome = switch (outcomeCode) {
            case OUTCOME_OK, OUTCOME_CANCELLED -> {
                if (errorCode != 0) throw WireReader.malformed("error_code must be 0 unless the outcome is FAILED");
                yield outcomeCode == OUTCOME_OK ? Reply.Settled.OK : Reply.Settled.CANCELLED;
            }
            case OUTCOME_FAILED -> new Reply.Failed(ErrorCode.ofCode(errorCode)
                    .orElseThrow(() -> WireReader.malformed("unknown error code " + errorCode)));
            default -> throw WireReader.malformed("unknown outcome " + outcomeCode);
        };
        return new Reply.Completion(op, revision, event, outcome);
    }

    /** The enum constant with {@code code}, or MALFORMED. */
    static <E extends Enum<E> & WireCode> E code(Class<E> type, int code, String field) {
        return WireCode.lookup(type, code)
                .orElseThrow(() -> WireReader.malformed("unknown " + field + " " + code));
    }
}
