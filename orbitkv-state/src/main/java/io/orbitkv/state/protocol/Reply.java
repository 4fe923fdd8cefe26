package io.orbitkv.state.protocol;

import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * The frames the Manager sends: one typed reply per request (same request id), plus the
 * asynchronous {@link Completion} (request id 0) and {@link Error}. Field encodings are in
 * {@code docs/protocol.md}, in component order.
 *
 * <p>Values; immutable and thread-safe; invariants are checked by the compact constructors.
 * Impossible combinations cannot be built: a lease exists only on a RESIDENT page, a reservation
 * id only on a granted entry, an error code only on a FAILED completion.
 *
 * <p>Design note: a QUERY_RESULT page is a {@link PageResult}, but a span keeps its pages packed
 * ({@link PageEntries}: a state byte per page, lease numbers in primitive arrays), so neither a
 * 65,536-page miss nor a 1,024-page hit allocates an object per page when it is encoded, decoded
 * or checked; {@link PageEntries#get} builds a {@link Resident} and its {@link Lease} only for a
 * caller that asks for one. A fixed 17-byte page entry on the wire was rejected: a lease-less
 * entry is 1 byte, so a 1,024-page result with nothing resident is 1 KiB instead of 17 KiB.
 */
public sealed interface Reply extends Frame {

    /** Most spans (disjoint page ranges) one group may have in a QUERY_RESULT: sinks plus window need 2. */
    int MAX_SPANS_PER_GROUP = 16;

    /**
     * One arena the client maps; its index in {@link Registered#arenas()} is the lease's arena
     * index. The arena itself reaches the client as a file descriptor from the descriptor socket
     * (protocol §6.11), never as a path. Invariant: {@code sizeBytes >= slotBytes} (not a
     * multiple: the file starts with a header).
     */
    record ArenaFile(long sizeBytes, int slotBytes) {
        public ArenaFile {
            Check.positive("slot_bytes", slotBytes);
            Check.positive("size_bytes", sizeBytes);
            // Not a multiple: an arena file starts with a header page; leases carry absolute offsets.
            if (sizeBytes < slotBytes) {
                throw new IllegalArgumentException("size_bytes " + sizeBytes + " is below slot_bytes " + slotBytes);
            }
        }
    }

    /**
     * REGISTER succeeded: the incarnation id of this session, the Manager's limits, the one-time
     * {@code ticket} that fetches the arenas' descriptors from {@code descriptorSocket} and the
     * arenas' sizes. Invariants: incarnation id {@code >= 1}; epoch {@code >= 0}; 1..65,535
     * arenas; an absolute socket path of 1..107 bytes (what {@code sun_path} holds).
     */
    record Registered(long incarnationId, long epoch, ProtocolLimits limits, DescriptorTicket ticket,
                      String descriptorSocket, List<ArenaFile> arenas) implements Reply {
        /** {@code sizeof(sun_path)} minus its terminating zero. */
        public static final int MAX_SOCKET_PATH_BYTES = 107;

        public Registered {
            Check.positive("incarnation_id", incarnationId);
            Check.nonNegative("epoch", epoch);
            Objects.requireNonNull(limits, "limits");
            Objects.requireNonNull(ticket, "ticket");
            Check.text("descriptor_socket", descriptorSocket, 1, MAX_SOCKET_PATH_BYTES);
            if (!descriptorSocket.startsWith("/")) {
                throw new IllegalArgumentException("descriptor_socket must be an absolute path: " + descriptorSocket);
            }
            arenas = Check.list("arenas", arenas, 1, Check.U16_MAX);
        }

        @Override
        public FrameType type() {
            return FrameType.REGISTERED;
        }
    }

    /** REGISTER_REGION succeeded; RESTORE names the region by this id. */
    record RegionRegistered(int regionId) implements Reply {
        public RegionRegistered {
            Check.nonNegative("region_id", regionId);
        }

        @Override
        public FrameType type() {
            return FrameType.REGION_REGISTERED;
        }
    }

    /** Where a RESIDENT page's bytes are: {@code lengthBytes} at {@code offsetBytes} of arena {@code arenaIndex}. */
    record Lease(int arenaIndex, long offsetBytes, int lengthBytes) {
        public Lease {
            Check.nonNegative("arena_index", arenaIndex);
            Check.nonNegative("offset_bytes", offsetBytes);
            Check.positive("length_bytes", lengthBytes);
        }
    }

    /** One page of a QUERY_RESULT: its state, and a lease exactly when it is RESIDENT. */
    sealed interface PageResult permits Unleased, Resident {
        /** The page's state. */
        PageState state();
    }

    /** Every state except RESIDENT: no lease to carry, so one shared constant per state. */
    enum Unleased implements PageResult {
        MISS(PageState.MISS),
        CANDIDATE(PageState.CANDIDATE),
        RESERVED(PageState.RESERVED),
        READY(PageState.READY);

        private final PageState state;

        Unleased(PageState state) {
            this.state = state;
        }

        @Override
        public PageState state() {
            return state;
        }
    }

    /** A RESIDENT page and its lease. */
    record Resident(Lease lease) implements PageResult {
        public Resident {
            Objects.requireNonNull(lease, "lease");
        }

        @Override
        public PageState state() {
            return PageState.RESIDENT;
        }
    }

    /**
     * Pages {@code [firstPage, firstPage + pages.size())} of a group. Invariants: first page
     * {@code >= 0}; at least one page. {@code pages} is always a packed {@link PageEntries} (a
     * list given in another form is copied into one), so {@link #entries()} reads states and
     * leases without an object per page.
     */
    record Span(long firstPage, List<PageResult> pages) {
        public Span {
            Check.nonNegative("first_page", firstPage);
            pages = PageEntries.copyOf(pages);
        }

        /** The pages, packed. */
        public PageEntries entries() {
            return (PageEntries) pages;
        }

        /** One past the last page. */
        public long endPage() {
            return firstPage + pages.size();
        }
    }

    /** A group's coverage: ascending, disjoint spans; none when the group needs nothing. */
    record GroupResult(int groupId, List<Span> spans) {
        public GroupResult {
            Check.nonNegative("group_id", groupId);
            spans = Check.list("spans", spans, 0, MAX_SPANS_PER_GROUP);
            for (int i = 1; i < spans.size(); i++) {
                if (spans.get(i).firstPage() < spans.get(i - 1).endPage()) {
                    throw new IllegalArgumentException("spans of group " + groupId + " must ascend without overlap");
                }
            }
        }

        /** Pages summed over the spans. */
        public long pageCount() {
            long n = 0;
            for (Span s : spans) n += s.pages().size();
            return n;
        }
    }

    /**
     * The answer to QUERY and QUERY_POLL. Invariants: operation id {@code >= 1}; revision and
     * boundary {@code >= 0}; group ids distinct; a FINAL hit has only RESIDENT or READY pages
     * (leases on exactly the required ranges); a FINAL miss holds nothing (only MISS or CANDIDATE).
     */
    record QueryResult(long operationId, int revision, QueryStatus status, boolean hit, long boundaryTokens,
                       List<GroupResult> groups) implements Reply {
        public QueryResult {
            Check.positive("operation_id", operationId);
            Check.nonNegative("revision", revision);
            Objects.requireNonNull(status, "status");
            Check.nonNegative("boundary_tokens", boundaryTokens);
            groups = Check.list("groups", groups, 0, Check.U16_MAX);
            Check.uniqueIds("groups", groups, GroupResult::groupId);
            if (status == QueryStatus.FINAL) {
                for (GroupResult g : groups) {
                    for (Span s : g.spans()) {
                        PageEntries e = s.entries();
                        for (int i = 0; i < e.size(); i++) requireFinal(hit, e.state(i), g.groupId());
                    }
                }
            }
        }

        private static void requireFinal(boolean hit, PageState state, int groupId) {
            boolean allowed = switch (state) {
                case MISS, CANDIDATE -> !hit;
                case RESIDENT, READY -> hit;
                case RESERVED -> false;
            };
            if (!allowed) {
                throw new IllegalArgumentException("a FINAL " + (hit ? "hit" : "miss") + " cannot have a "
                        + state + " page (group " + groupId + ")");
            }
        }

        /** Pages summed over the groups. */
        public long pageCount() {
            long n = 0;
            for (GroupResult g : groups) n += g.pageCount();
            return n;
        }

        @Override
        public FrameType type() {
            return FrameType.QUERY_RESULT;
        }
    }

    /**
     * CANCEL accepted. {@code drained}: nothing was in flight and everything is released now;
     * otherwise a COMPLETION DRAINED follows. {@code pagesReleased}: leases released by this reply.
     */
    record Cancelled(long operationId, boolean drained, int pagesReleased) implements Reply {
        public Cancelled {
            Check.positive("operation_id", operationId);
            Check.nonNegative("pages_released", pagesReleased);
        }

        @Override
        public FrameType type() {
            return FrameType.CANCELLED;
        }
    }

    /** RELEASE accepted; fields as in {@link Cancelled}. */
    record Released(long operationId, boolean drained, int pagesReleased) implements Reply {
        public Released {
            Check.positive("operation_id", operationId);
            Check.nonNegative("pages_released", pagesReleased);
        }

        @Override
        public FrameType type() {
            return FrameType.RELEASED;
        }
    }

    /** One PUBLISH_RESERVE entry's answer: a granted slot, or a refusal. */
    sealed interface ReserveOutcome permits Granted, Refused {
    }

    /** Write the page's bytes at {@code offsetBytes} of arena {@code arenaIndex}, then commit {@code reservationId}. */
    record Granted(long reservationId, int arenaIndex, long offsetBytes) implements ReserveOutcome {
        public Granted {
            Check.positive("reservation_id", reservationId);
            Check.nonNegative("arena_index", arenaIndex);
            Check.nonNegative("offset_bytes", offsetBytes);
        }
    }

    /** This page was not reserved, for {@code reason}. */
    record Refused(Refusal reason) implements ReserveOutcome {
        public Refused {
            Objects.requireNonNull(reason, "reason");
        }
    }

    /** The answer to PUBLISH_RESERVE: one outcome per requested page, in request order; at least one. */
    record Reserved(List<ReserveOutcome> outcomes) implements Reply {
        public Reserved {
            outcomes = Check.list("outcomes", outcomes, 1, Integer.MAX_VALUE);
        }

        @Override
        public FrameType type() {
            return FrameType.RESERVED;
        }
    }

    /** The answer to PUBLISH_COMMIT: one of SEALED, NOT_FOUND, DISCARDED per id, in request order. */
    record Committed(List<SettleOutcome> outcomes) implements Reply {
        public Committed {
            outcomes = settleList(outcomes, SettleOutcome.ABORTED);
        }

        @Override
        public FrameType type() {
            return FrameType.COMMITTED;
        }
    }

    /** The answer to PUBLISH_ABORT: ABORTED or NOT_FOUND per id, in request order. */
    record Aborted(List<SettleOutcome> outcomes) implements Reply {
        public Aborted {
            outcomes = settleList(outcomes, SettleOutcome.SEALED);
            if (outcomes.contains(SettleOutcome.DISCARDED)) {
                throw new IllegalArgumentException("an abort cannot discard");
            }
        }

        @Override
        public FrameType type() {
            return FrameType.ABORTED;
        }
    }

    /** RESTORE accepted: {@code pageCount} copies are submitted; COMPLETION RESTORE_DONE follows. */
    record RestoreAccepted(long operationId, int pageCount) implements Reply {
        public RestoreAccepted {
            Check.positive("operation_id", operationId);
            Check.positive("page_count", pageCount);
        }

        @Override
        public FrameType type() {
            return FrameType.RESTORE_ACCEPTED;
        }
    }

    /** How the Manager took a PREPARE (protocol §6.12). */
    enum PrepareOutcome implements WireCode {
        /** Every page to stage fits the speculation budget: they are staged (or already resident). */
        ACCEPTED(1),
        /** Only a shorter legal boundary fits the budget: its pages are staged, the rest are not. */
        TRIMMED(2),
        /** Nothing fits the budget (or the Manager's prepare table is full): nothing is staged or held. */
        REFUSED(3);

        private final int code;

        PrepareOutcome(int code) {
            this.code = code;
        }

        @Override
        public int code() {
            return code;
        }
    }

    /**
     * The answer to PREPARE. It never reports a hit: prepared pages become the engine's only when a
     * later QUERY leases them. Invariants: operation id {@code >= 1}; counts, delay and bytes
     * {@code >= 0}; a REFUSED answer stages nothing.
     *
     * @param pagesToStage     pages the Manager will stage into DRAM (SSD or peers) and hold
     * @param pagesResident    pages of the planned boundary already resident in DRAM (not held)
     * @param startDelayMillis how long the Manager waits before the first read (deadline-driven start)
     * @param bytesToStage     the speculation budget taken (4 KiB-padded payload bytes)
     */
    record Prepared(long operationId, PrepareOutcome outcome, int pagesToStage, int pagesResident,
                    int startDelayMillis, long bytesToStage) implements Reply {
        public Prepared {
            Check.positive("operation_id", operationId);
            Objects.requireNonNull(outcome, "outcome");
            Check.nonNegative("pages_to_stage", pagesToStage);
            Check.nonNegative("pages_resident", pagesResident);
            Check.nonNegative("start_delay_millis", startDelayMillis);
            Check.nonNegative("bytes_to_stage", bytesToStage);
            if (outcome == PrepareOutcome.REFUSED && (pagesToStage != 0 || bytesToStage != 0)) {
                throw new IllegalArgumentException("a REFUSED prepare stages nothing");
            }
        }

        @Override
        public FrameType type() {
            return FrameType.PREPARED;
        }
    }

    /** One named counter. Names are 1..64 characters of {@code [a-z0-9_.]}; values {@code >= 0}. */
    record Counter(String name, long value) {
        private static final Pattern NAME = Pattern.compile("[a-z0-9_.]{1,64}");

        public Counter {
            Objects.requireNonNull(name, "name");
            if (!NAME.matcher(name).matches()) throw new IllegalArgumentException("bad counter name: " + name);
            Check.nonNegative("value", value);
        }
    }

    /** The answer to STATS: counters with distinct names; clients ignore names they do not know. */
    record StatsReply(List<Counter> counters) implements Reply {
        public StatsReply {
            counters = Check.list("counters", counters, 0, Check.U16_MAX);
            Set<String> names = new HashSet<>();
            for (Counter c : counters) {
                if (!names.add(c.name())) throw new IllegalArgumentException("counter " + c.name() + " appears twice");
            }
        }

        @Override
        public FrameType type() {
            return FrameType.STATS_REPLY;
        }
    }

    /**
     * The answer to HINT (protocol §6.13): of the pages named, how many the hint was applied to,
     * how many this namespace does not hold (in DRAM; for DROP, in DRAM or on SSD) and how many a
     * PIN could not take within the namespace's pinned-byte budget. Counts {@code >= 0}.
     */
    record Hinted(HintKind kind, int applied, int notResident, int refusedBudget) implements Reply {
        public Hinted {
            Objects.requireNonNull(kind, "kind");
            Check.nonNegative("applied", applied);
            Check.nonNegative("not_resident", notResident);
            Check.nonNegative("refused_budget", refusedBudget);
        }

        @Override
        public FrameType type() {
            return FrameType.HINTED;
        }
    }

    /**
     * The answer to CONTAINS (protocol §6.14): one location per page named, in the order named
     * (group by group). {@code peers}: this Manager has peers, so a page it reports
     * {@link PageLocation#ABSENT} may still be held by one (a QUERY with a peer wait finds it).
     */
    record Contained(boolean peers, List<PageLocation> locations) implements Reply {
        public Contained {
            locations = List.copyOf(Objects.requireNonNull(locations, "locations"));
        }

        @Override
        public FrameType type() {
            return FrameType.CONTAINED;
        }
    }

    /** How the work a COMPLETION reports ended. */
    sealed interface Outcome permits Settled, Failed {
    }

    /** Ended without an error: OK, or CANCELLED by the client. */
    enum Settled implements Outcome {
        OK,
        CANCELLED
    }

    /** Ended with {@code error}; what the operation held is released. */
    record Failed(ErrorCode error) implements Outcome {
        public Failed {
            Objects.requireNonNull(error, "error");
        }
    }

    /** Asynchronous event about operation {@code operationId} at {@code revision}; travels with request id 0. */
    record Completion(long operationId, int revision, CompletionEvent event, Outcome outcome) implements Reply {
        public Completion {
            Check.positive("operation_id", operationId);
            Check.nonNegative("revision", revision);
            Objects.requireNonNull(event, "event");
            Objects.requireNonNull(outcome, "outcome");
        }

        @Override
        public FrameType type() {
            return FrameType.COMPLETION;
        }
    }

    /** The request failed with {@code code}; {@code message} is for people (UTF-8, up to 65,535 bytes). */
    record Error(ErrorCode code, String message) implements Reply {
        public Error {
            Objects.requireNonNull(code, "code");
            Check.text("message", message, 0, Check.U16_MAX);
        }

        @Override
        public FrameType type() {
            return FrameType.ERROR;
        }
    }

    private static List<SettleOutcome> settleList(List<SettleOutcome> outcomes, SettleOutcome forbidden) {
        List<SettleOutcome> copy = Check.list("outcomes", outcomes, 1, Integer.MAX_VALUE);
        if (copy.contains(forbidden)) throw new IllegalArgumentException(forbidden + " does not answer this request");
        return copy;
    }
}
