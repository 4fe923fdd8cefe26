package io.orbitkv.state.protocol;

import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.RecoveryContractEncoding;
import io.orbitkv.state.StateKey;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;

/**
 * The frames a client (engine) sends to the Manager; each gets exactly one reply (its typed reply
 * or ERROR) carrying the same request id. Field encodings are in {@code docs/protocol.md}, in
 * component order.
 *
 * <p>Values; immutable and thread-safe; every invariant below is checked by the compact
 * constructor ({@link IllegalArgumentException}). Ids and counts that travel as u32/u64 are
 * limited to {@code 2^31-1}/{@code 2^63-1}, the non-negative range of Java's int and long.
 *
 * <p>Design note: records validated at construction, rather than flyweights over the receive
 * buffer, because a request is decoded once and then handed to another thread (the Manager's
 * operation owner), so it must not alias a buffer that is about to be reused; the one bulky field,
 * a QUERY's page names, is a single packed {@link Hashes} array (2 MiB for 65,536 keys), not an
 * object per page.
 */
public sealed interface Request extends Frame {

    /** Largest UTF-8 length of an instance id, in bytes. */
    int MAX_INSTANCE_ID_BYTES = 256;

    /**
     * Opens (or re-opens, with a higher epoch) an engine instance's session. Invariants:
     * instance id 1..{@value #MAX_INSTANCE_ID_BYTES} UTF-8 bytes; epoch {@code >= 0}; the
     * contract's page size equals the namespace's; the contract has at most
     * {@value RecoveryContractEncoding#MAX_GROUPS} groups.
     */
    record Register(String instanceId, long epoch, Namespace namespace, RecoveryContract contract) implements Request {
        public Register {
            Check.text("instance_id", instanceId, 1, MAX_INSTANCE_ID_BYTES);
            Check.nonNegative("epoch", epoch);
            Objects.requireNonNull(namespace, "namespace");
            Objects.requireNonNull(contract, "contract");
            if (contract.pageTokens() != namespace.pageTokens()) {
                throw new IllegalArgumentException("contract page_tokens " + contract.pageTokens()
                        + " differs from the namespace's " + namespace.pageTokens());
            }
            Check.atMost("contract groups", contract.groups().size(), RecoveryContractEncoding.MAX_GROUPS);
        }

        @Override
        public FrameType type() {
            return FrameType.REGISTER;
        }
    }

    /**
     * Where a region's memory comes from: a file the client owns under the Manager's
     * {@code regionDir} ({@link FromPath}), or a descriptor the client handed the Manager on the
     * descriptor socket, named by the handle it got back ({@link FromDescriptor}; protocol §6.11).
     */
    sealed interface RegionSource {
        /** The wire code of the form: 1 path, 2 descriptor. */
        int code();
    }

    /** A region file named by its absolute path (checked as protocol §5.2 says). */
    record FromPath(String path) implements RegionSource {
        public static final int CODE = 1;

        public FromPath {
            Check.text("path", path, 1, Check.U16_MAX);
        }

        @Override
        public int code() {
            return CODE;
        }
    }

    /** A region descriptor the client passed on the descriptor socket; {@code handle} is what it got back. */
    record FromDescriptor(DescriptorTicket handle) implements RegionSource {
        public static final int CODE = 2;

        public FromDescriptor {
            Objects.requireNonNull(handle, "handle");
        }

        @Override
        public int code() {
            return CODE;
        }
    }

    /**
     * Registers a destination region for ENGINE_RESTORE: shared memory of {@code sizeBytes}
     * holding {@code pageCount} pages of {@code pageBytes}, from {@code source}. Invariant:
     * {@code pageBytes * pageCount <= sizeBytes}.
     */
    record RegisterRegion(RegionSource source, long sizeBytes, int pageBytes, int pageCount) implements Request {
        public RegisterRegion {
            Objects.requireNonNull(source, "source");
            Check.positive("page_bytes", pageBytes);
            Check.positive("page_count", pageCount);
            Check.positive("size_bytes", sizeBytes);
            if ((long) pageBytes * pageCount > sizeBytes) {
                throw new IllegalArgumentException(pageCount + " pages of " + pageBytes + " bytes exceed size_bytes " + sizeBytes);
            }
        }

        /** A region from the file {@code path}. */
        public RegisterRegion(String path, long sizeBytes, int pageBytes, int pageCount) {
            this(new FromPath(path), sizeBytes, pageBytes, pageCount);
        }

        @Override
        public FrameType type() {
            return FrameType.REGISTER_REGION;
        }
    }

    /**
     * One state group's page names in a QUERY, page 0 first (entry {@code i} names the page of
     * tokens {@code [i*P, (i+1)*P)}; for a recurrent group, the checkpoint at token {@code (i+1)*P}).
     * Invariants: group id {@code >= 0}; a {@link KeyForm#STATE_KEY} group has 32-byte hashes.
     */
    record QueryGroup(int groupId, KeyForm form, Hashes hashes) {
        public QueryGroup {
            Check.nonNegative("group_id", groupId);
            Objects.requireNonNull(form, "form");
            Objects.requireNonNull(hashes, "hashes");
            requireKeyWidth(form, hashes);
        }
    }

    /**
     * Asks which prefix of the prompt the Manager can restore, and leases it. A QUERY with an
     * operation id that is live replaces that operation when its revision is higher.
     * Invariants: operation id {@code >= 1}; revision {@code >= 0};
     * {@code 0 <= originTokens < promptTokens}; {@code prefillTokensPerSecond >= 0} (0 = the engine
     * has not measured its prefill rate); 1..65,535 groups with distinct ids.
     * <p>{@code prefillTokensPerSecond} is the engine's measured prefill rate for this prompt's
     * model; the Manager uses it to weigh a shorter DRAM-only boundary against a longer one that
     * needs SSD staging or a peer fetch (first-token estimate). It is a hint: 0 keeps the longest
     * legal boundary.
     */
    record Query(long operationId, int revision, CompletionTarget target, long promptTokens, long originTokens,
                 int prefillTokensPerSecond, int peerWaitMillis, List<QueryGroup> groups) implements Request {
        public Query {
            Check.positive("operation_id", operationId);
            Check.nonNegative("revision", revision);
            Objects.requireNonNull(target, "target");
            Check.positive("prompt_tokens", promptTokens);
            Check.nonNegative("origin_tokens", originTokens);
            if (originTokens >= promptTokens) {
                throw new IllegalArgumentException("origin_tokens " + originTokens + " must be below prompt_tokens " + promptTokens);
            }
            Check.nonNegative("prefill_tokens_per_second", prefillTokensPerSecond);
            Check.nonNegative("peer_wait_millis", peerWaitMillis);
            groups = Check.list("groups", groups, 1, Check.U16_MAX);
            Check.uniqueIds("groups", groups, QueryGroup::groupId);
        }

        /** A QUERY that never waits for peers ({@code peer_wait_millis} 0). */
        public Query(long operationId, int revision, CompletionTarget target, long promptTokens, long originTokens,
                     int prefillTokensPerSecond, List<QueryGroup> groups) {
            this(operationId, revision, target, promptTokens, originTokens, prefillTokensPerSecond, 0, groups);
        }

        /** A QUERY from an engine that has not measured its prefill rate (0 = unknown) and never waits for peers. */
        public Query(long operationId, int revision, CompletionTarget target, long promptTokens, long originTokens,
                     List<QueryGroup> groups) {
            this(operationId, revision, target, promptTokens, originTokens, 0, 0, groups);
        }

        /**
         * A builder for the QUERY of operation {@code operationId} over a prompt of
         * {@code promptTokens}: revision 0, target {@link CompletionTarget#HOST_READY}, origin 0,
         * no measured prefill rate and no peer wait unless set; at least one group is required.
         */
        public static Builder builder(long operationId, long promptTokens) {
            return new Builder(operationId, promptTokens);
        }

        /**
         * Sets a QUERY's fields by name and collects its groups in order. {@link #build()} checks
         * every invariant of the record (the same messages); a builder with no group is refused.
         * Not thread-safe; one builder per QUERY.
         */
        public static final class Builder {
            private final long operationId;
            private final long promptTokens;
            private int revision;
            private CompletionTarget target = CompletionTarget.HOST_READY;
            private long originTokens;
            private int prefillTokensPerSecond;
            private int peerWaitMillis;
            private final List<QueryGroup> groups = new java.util.ArrayList<>();

            private Builder(long operationId, long promptTokens) {
                this.operationId = operationId;
                this.promptTokens = promptTokens;
            }

            /** The revision; a live operation is replaced only by a higher one (default 0). */
            public Builder revision(int revision) {
                this.revision = revision;
                return this;
            }

            /** Where the answer is to be complete: {@code HOST_READY} (default) or {@code ENGINE_RESTORE}. */
            public Builder target(CompletionTarget target) {
                this.target = Objects.requireNonNull(target, "target");
                return this;
            }

            /** The first token the engine still holds state for (default 0). */
            public Builder originTokens(long originTokens) {
                this.originTokens = originTokens;
                return this;
            }

            /** The engine's measured prefill rate for this model; 0 (default) = not measured. */
            public Builder prefillTokensPerSecond(int tokensPerSecond) {
                this.prefillTokensPerSecond = tokensPerSecond;
                return this;
            }

            /** How long a clustered Manager may look for pages only peers hold; 0 (default) = never wait. */
            public Builder peerWaitMillis(int millis) {
                this.peerWaitMillis = millis;
                return this;
            }

            /** Adds state group {@code groupId}'s page names, page 0 first. */
            public Builder group(int groupId, KeyForm form, Hashes hashes) {
                groups.add(new QueryGroup(groupId, form, hashes));
                return this;
            }

            /**
             * The QUERY.
             *
             * @throws IllegalArgumentException if no group was added or an invariant is broken
             */
            public Query build() {
                if (groups.isEmpty()) throw new IllegalArgumentException("a QUERY needs at least one group");
                return new Query(operationId, revision, target, promptTokens, originTokens, prefillTokensPerSecond,
                        peerWaitMillis, groups);
            }
        }

        /** This QUERY with {@code peer_wait_millis} = {@code millis}. */
        public Query withPeerWaitMillis(int millis) {
            return new Query(operationId, revision, target, promptTokens, originTokens, prefillTokensPerSecond, millis, groups);
        }

        /** Pages summed over the groups. */
        public long pageCount() {
            return pagesOf(groups);
        }

        @Override
        public FrameType type() {
            return FrameType.QUERY;
        }
    }

    /** Asks for the current result of a live operation at {@code revision}. */
    record QueryPoll(long operationId, int revision) implements Request {
        public QueryPoll {
            Check.positive("operation_id", operationId);
            Check.nonNegative("revision", revision);
        }

        @Override
        public FrameType type() {
            return FrameType.QUERY_POLL;
        }
    }

    /** Stops an operation: unsubmitted work at once, submitted I/O drains before release. */
    record Cancel(long operationId) implements Request {
        public Cancel {
            Check.positive("operation_id", operationId);
        }

        @Override
        public FrameType type() {
            return FrameType.CANCEL;
        }
    }

    /**
     * One page to publish: its group, its name (exactly one hash) and its image size. Invariants:
     * group id {@code >= 0}; {@code lengthBytes >= 1}; a STATE_KEY name is 32 bytes.
     */
    record PublishPage(int groupId, KeyForm form, Hashes name, int lengthBytes) {
        public PublishPage {
            Check.nonNegative("group_id", groupId);
            Objects.requireNonNull(form, "form");
            Objects.requireNonNull(name, "name");
            if (name.count() != 1) throw new IllegalArgumentException("a publish entry has exactly one name: " + name.count());
            requireKeyWidth(form, name);
            Check.positive("length_bytes", lengthBytes);
        }
    }

    /** Largest UTF-8 length of a PUBLISH_RESERVE tenant label, in bytes. */
    int MAX_TENANT_BYTES = 64;

    /**
     * Reserves arena slots for pages the engine will write; at least one page. {@code tenant} is the
     * optional tenant label the pages are charged to (an engine's {@code cache_salt}):
     * 1..{@value #MAX_TENANT_BYTES} UTF-8 bytes when present; absent, the namespace's default tenant.
     */
    record PublishReserve(List<PublishPage> pages, Optional<String> tenant) implements Request {
        public PublishReserve {
            pages = Check.list("pages", pages, 1, Integer.MAX_VALUE);
            Objects.requireNonNull(tenant, "tenant");
            tenant.ifPresent(t -> Check.text("tenant", t, 1, MAX_TENANT_BYTES));
        }

        /** Pages charged to the namespace's default tenant (no label). */
        public PublishReserve(List<PublishPage> pages) {
            this(pages, Optional.empty());
        }

        @Override
        public FrameType type() {
            return FrameType.PUBLISH_RESERVE;
        }
    }

    /** Seals reserved slots the engine has written; ids {@code >= 1}, at least one, distinct. */
    record PublishCommit(List<Long> reservationIds) implements Request {
        public PublishCommit {
            reservationIds = reservationIdList(reservationIds);
        }

        @Override
        public FrameType type() {
            return FrameType.PUBLISH_COMMIT;
        }
    }

    /** Frees reserved slots without sealing them; ids {@code >= 1}, at least one, distinct. */
    record PublishAbort(List<Long> reservationIds) implements Request {
        public PublishAbort {
            reservationIds = reservationIdList(reservationIds);
        }

        @Override
        public FrameType type() {
            return FrameType.PUBLISH_ABORT;
        }
    }

    /** Copy source page {@code sourcePage} of group {@code groupId} into destination page {@code destinationPage}. */
    record RestorePage(int groupId, long sourcePage, int destinationPage) {
        public RestorePage {
            Check.nonNegative("group_id", groupId);
            Check.nonNegative("source_page", sourcePage);
            Check.nonNegative("destination_page", destinationPage);
        }
    }

    /**
     * Copies leased pages of an operation into a registered region; completion is an asynchronous
     * COMPLETION (RESTORE_DONE). Invariants: at least one page; no source page and no destination
     * page appears twice.
     */
    record Restore(long operationId, int regionId, List<RestorePage> pages) implements Request {
        public Restore {
            Check.positive("operation_id", operationId);
            Check.nonNegative("region_id", regionId);
            pages = Check.list("pages", pages, 1, Integer.MAX_VALUE);
            Set<Integer> destinations = new HashSet<>();
            Map<Integer, Set<Long>> sources = new HashMap<>();
            for (RestorePage p : pages) {
                if (!destinations.add(p.destinationPage())) {
                    throw new IllegalArgumentException("destination page " + p.destinationPage() + " appears twice");
                }
                if (!sources.computeIfAbsent(p.groupId(), g -> new HashSet<>()).add(p.sourcePage())) {
                    throw new IllegalArgumentException("source page " + p.sourcePage() + " of group " + p.groupId() + " appears twice");
                }
            }
        }

        @Override
        public FrameType type() {
            return FrameType.RESTORE;
        }
    }

    /** Releases every lease of an operation and ends it (after any restore drains). */
    record Release(long operationId) implements Request {
        public Release {
            Check.positive("operation_id", operationId);
        }

        @Override
        public FrameType type() {
            return FrameType.RELEASE;
        }
    }

    /** Asks for the Manager's counters. */
    record Stats() implements Request {
        @Override
        public FrameType type() {
            return FrameType.STATS;
        }
    }

    /**
     * Asks the Manager to stage a prefix's missing pages into DRAM before its first use, without
     * leasing anything to the engine (protocol §5.11). The demand is encoded as QUERY's: the
     * groups' page names, the prompt and the origin. Invariants: operation id {@code >= 1};
     * {@code 0 <= firstUseMillis} (relative to the Manager's receipt); priority {@code 0..255}
     * (higher first); {@code 0 <= originTokens < promptTokens}; 1..65,535 groups with distinct ids.
     */
    record Prepare(long operationId, int firstUseMillis, int priority, long promptTokens, long originTokens,
                   List<QueryGroup> groups) implements Request {
        /** Highest priority. */
        public static final int MAX_PRIORITY = 255;

        public Prepare {
            Check.positive("operation_id", operationId);
            Check.nonNegative("first_use_millis", firstUseMillis);
            if (priority < 0 || priority > MAX_PRIORITY) {
                throw new IllegalArgumentException("priority must be 0.." + MAX_PRIORITY + ": " + priority);
            }
            Check.positive("prompt_tokens", promptTokens);
            Check.nonNegative("origin_tokens", originTokens);
            if (originTokens >= promptTokens) {
                throw new IllegalArgumentException("origin_tokens " + originTokens + " must be below prompt_tokens " + promptTokens);
            }
            groups = Check.list("groups", groups, 1, Check.U16_MAX);
            Check.uniqueIds("groups", groups, QueryGroup::groupId);
        }

        /** The demand as the HOST_READY QUERY (revision 0, no prefill rate, no peer wait) it is planned as. */
        public Query asQuery() {
            return new Query(operationId, 0, CompletionTarget.HOST_READY, promptTokens, originTokens, 0, 0, groups);
        }

        @Override
        public FrameType type() {
            return FrameType.PREPARE;
        }
    }

    /**
     * A value hint for the pages it names, in this connection's namespace (protocol §5.12): pin,
     * unpin, retain, demote or drop. Invariants: {@code durationMillis >= 1} for
     * {@link HintKind#PIN} and 0 for every other kind; 1..65,535 groups with distinct ids.
     */
    record Hint(HintKind kind, int durationMillis, List<QueryGroup> groups) implements Request {
        public Hint {
            Objects.requireNonNull(kind, "kind");
            if (kind == HintKind.PIN) Check.positive("duration_millis", durationMillis);
            else if (durationMillis != 0) throw new IllegalArgumentException("duration_millis must be 0 for " + kind);
            groups = Check.list("groups", groups, 1, Check.U16_MAX);
            Check.uniqueIds("groups", groups, QueryGroup::groupId);
        }

        /** Pages summed over the groups. */
        public long pageCount() {
            return pagesOf(groups);
        }

        @Override
        public FrameType type() {
            return FrameType.HINT;
        }
    }

    /**
     * Where each page it names is held on this Manager now, in this connection's namespace
     * (protocol §5.13): a batch of independent names answered in one frame, with no operation,
     * lease or staging. Invariants: 1..65,535 groups with distinct ids.
     */
    record Contains(List<QueryGroup> groups) implements Request {
        public Contains {
            groups = Check.list("groups", groups, 1, Check.U16_MAX);
            Check.uniqueIds("groups", groups, QueryGroup::groupId);
        }

        /** Pages summed over the groups. */
        public long pageCount() {
            return pagesOf(groups);
        }

        @Override
        public FrameType type() {
            return FrameType.CONTAINS;
        }
    }

    private static long pagesOf(List<QueryGroup> groups) {
        long n = 0;
        for (QueryGroup g : groups) n += g.hashes().count();
        return n;
    }

    private static void requireKeyWidth(KeyForm form, Hashes hashes) {
        if (form == KeyForm.STATE_KEY && hashes.width() != StateKey.BYTES) {
            throw new IllegalArgumentException("state keys are 32 bytes, not " + hashes.width());
        }
    }

    private static List<Long> reservationIdList(List<Long> ids) {
        List<Long> copy = Check.list("reservation_ids", ids, 1, Integer.MAX_VALUE);
        Set<Long> seen = new HashSet<>();
        for (long id : copy) {
            Check.positive("reservation_id", id);
            if (!seen.add(id)) throw new IllegalArgumentException("reservation id " + id + " appears twice");
        }
        return copy;
    }
}
