package io.orbitkv.core.peer;

import io.orbitkv.core.cost.ByteCount;
import io.orbitkv.core.cost.CostKey;
import io.orbitkv.core.cost.CostObserver;
import io.orbitkv.core.cost.CostPath;
import io.orbitkv.core.cost.Observation;
import io.orbitkv.core.cost.RepresentationFamily;
import io.orbitkv.core.cost.ResourceId;
import io.orbitkv.core.cost.SampleKind;
import io.orbitkv.core.cost.Shape;
import io.orbitkv.core.cost.SourceMedium;
import io.orbitkv.core.cost.SourceOffer;
import io.orbitkv.core.cost.Terminal;
import io.orbitkv.core.cost.Timeline;
import io.orbitkv.core.log.UnexpectedErrors;
import io.orbitkv.core.log.UnexpectedErrors.Layer;
import io.orbitkv.core.query.RemotePages;
import io.orbitkv.core.query.SessionScope;
import io.orbitkv.core.query.SourceSelector;
import io.orbitkv.core.storage.StageResult;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.protocol.CompletionTarget;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

/**
 * The peer routes of the query planner ({@link RemotePages}): pages only peers hold become
 * staging candidates, and staging them runs a {@link PeerReader} over the page's
 * {@link ReadPlan} (peer DRAM before peer SSD, refusals replanned within the plan).
 *
 * <p>Borrows the catalog's candidate evidence ({@link Candidates}), the reader and the member
 * view; owns nothing. Thread model: thread-safe and non-blocking (see {@link RemotePages}).
 *
 * <p>Invariants: no candidate is offered and no fetch starts while the member view is invalid;
 * a fetch ends as a lease on bytes whose CRC32C matched the source's, or as a miss; a miss
 * after payload moved is IO_ERROR or CORRUPT, never NOT_FOUND (the query's
 * {@link SourceSelector} must not try another medium then). Each fetch that moved payload is
 * one {@code PEER_FETCH} route sample of its serving owner (failures censored).
 *
 * <p>Error boundary (layer {@code peer}), toward the query: every future this class returns
 * completes normally. The reader and the candidates answer their expected failures as values; a
 * throw or an exceptional future from them is a bug, recorded ({@link PeerBoundary}) and answered
 * as a NOT_FOUND miss (discovery: as nothing found), never as a wrong hit.
 *
 * <p>{@link #fetchAll} groups the pages of one query batch by their first candidate's source and
 * reads each group in one {@link PeerReader#readBatch} (one request per source over the bulk data
 * plane); a page its first source refused falls back to its next candidate on the one-page path.
 *
 * <p>Design note: a peer page is admitted against the staging budget at its length from the
 * catalog evidence, padded to 4 KiB as an SSD staging is; evidence without a length (0) is
 * charged {@code pageBytesBudget} (the largest DRAM slot): over-admitting by at most one slot per
 * page keeps the budget a true upper bound, where an under-estimate would let fetches overrun it.
 */
public final class PeerPages implements RemotePages {

    /** The catalog's positive evidence for a key, without a lookup RPC (its candidate cache). */
    public interface Candidates {
        /** Live peers believed to hold {@code key} in {@code namespace}; empty when unknown. */
        List<PeerCandidate> known(StateKey key, NamespaceDigest namespace);

        /**
         * As {@link #known}, starting no lookup for a key without candidates: for a caller that
         * looks its missing pages up itself ({@link #discover}). Default: {@link #known}.
         */
        default List<PeerCandidate> cached(StateKey key, NamespaceDigest namespace) {
            return known(key, namespace);
        }

        /**
         * Looks {@code keys} up now (one batch, one RPC per shard owner) so that {@link #known}
         * answers them afterwards; completes, never exceptionally, when the answers are in or at
         * the lookup deadline. Default: nothing to look up.
         */
        default CompletableFuture<Void> discover(List<StateKey> keys) {
            return CompletableFuture.completedFuture(null);
        }
    }

    private final Candidates candidates;
    private final PeerReader reader;
    private final MemberView members;
    private final long pageBytesBudget;
    private final CostObserver observer;
    private final LongSupplier nanoClock;

    /** Peer routes whose fetches are not observed (selection never offers them). */
    public PeerPages(Candidates candidates, PeerReader reader, MemberView members, long pageBytesBudget) {
        this(candidates, reader, members, pageBytesBudget, CostObserver.disabled(), System::nanoTime);
    }

    /**
     * Peer routes that record each fetch in {@code observer} as a {@link CostPath#PEER_FETCH}
     * complete-route sample ({@link #fetchKey}), timed by {@code nanoClock}.
     */
    public PeerPages(Candidates candidates, PeerReader reader, MemberView members, long pageBytesBudget,
                     CostObserver observer, LongSupplier nanoClock) {
        this.candidates = Objects.requireNonNull(candidates, "candidates");
        this.reader = Objects.requireNonNull(reader, "reader");
        this.members = Objects.requireNonNull(members, "members");
        if (pageBytesBudget <= 0) throw new IllegalArgumentException("pageBytesBudget: " + pageBytesBudget);
        this.pageBytesBudget = pageBytesBudget;
        this.observer = Objects.requireNonNull(observer, "observer");
        this.nanoClock = Objects.requireNonNull(nanoClock, "nanoClock");
    }

    /**
     * The complete-route key of a one-page fetch of {@code shape} from {@code candidate}: the
     * owner's resource identity ({@code peer:<node>/<medium>}) with its incarnation, so a
     * restarted peer never inherits its previous life's estimates.
     */
    public static CostKey fetchKey(PeerCandidate candidate, Shape shape) {
        NodeIncarnation node = candidate.source().node();
        return new CostKey(CostPath.PEER_FETCH, SampleKind.ROUTE,
                new ResourceId("peer:" + node.nodeId() + "/" + candidate.medium(), node.incarnation()),
                RepresentationFamily.RAW, CompletionTarget.HOST_READY, shape);
    }

    @Override
    public Optional<SourceOffer> offer(StateKey key, SessionScope scope, Shape shape) {
        if (!members.validForRemoteWork()) return Optional.empty();
        return new ReadPlan(key, false, false, candidates.known(key, scope.digest())).nextPeer()
                .map(first -> new SourceOffer(fetchKey(first, shape), medium(first.medium()), 1));
    }

    private static SourceMedium medium(PeerMedium medium) {
        return switch (medium) {
            case DRAM -> SourceMedium.DRAM;
            case SSD -> SourceMedium.SSD;
        };
    }

    @Override
    public long stagingBytes(StateKey key, SessionScope scope) {
        if (!members.validForRemoteWork()) return 0;
        // planning only: the query discovers its missing pages in one batch (PeerWait), so a key
        // without candidates starts no lookup of its own here
        return candidates.cached(key, scope.digest()).stream().mapToLong(c -> c.stagingBytes(pageBytesBudget)).max().orElse(0);
    }

    @Override
    public boolean discoverable() {
        return members.validForRemoteWork();
    }

    @Override
    public CompletableFuture<Void> discover(List<StateKey> keys, SessionScope scope) {
        if (keys.isEmpty() || !members.validForRemoteWork()) return CompletableFuture.completedFuture(null);
        return PeerBoundary.call(Layer.PEER, "PeerPages.discover", "no candidates found", null, () -> candidates.discover(keys));
    }

    @Override
    public CompletableFuture<StageResult> fetch(StateKey key, SessionScope scope) {
        StageResult.Miss miss = new StageResult.Miss(key, StageResult.MissReason.NOT_FOUND);
        if (!members.validForRemoteWork()) return CompletableFuture.completedFuture(miss);
        List<PeerCandidate> known = candidates.known(key, scope.digest());
        if (known.isEmpty()) return CompletableFuture.completedFuture(miss);
        long startedNanos = observer.enabled() ? nanoClock.getAsLong() : 0;
        return orMiss("PeerPages.fetch", miss, () -> reader.readAll(List.of(new ReadPlan(key, false, false, known)), scope.namespaceId())
                .thenApply(batch -> batch.entries().getFirst().result()
                        .<StageResult>map(r -> {
                            observe(r, startedNanos);
                            return stageResult(key, r);
                        })
                        .orElse(miss)));
    }

    /** The layer's boundary toward the query: a read that throws or fails exceptionally is {@code miss}, counted. */
    private static CompletableFuture<StageResult> orMiss(String site, StageResult.Miss miss,
                                                         Supplier<CompletableFuture<StageResult>> read) {
        return PeerBoundary.call(Layer.PEER, site, "a miss (NOT_FOUND)", miss, read);
    }

    /**
     * Fetches {@code keys}: pages whose first candidate is the same source go in one
     * {@link PeerReader#readBatch}; a page refused there ({@link PeerReadResult.Refused}, before
     * any payload byte) is retried on its next candidates one page at a time (an owner-wide
     * refusal drops every candidate of that owner from that page's plan). One future per key, in
     * order; never completes exceptionally.
     */
    @Override
    public List<CompletableFuture<StageResult>> fetchAll(List<StateKey> keys, SessionScope scope) {
        List<CompletableFuture<StageResult>> out = new ArrayList<>(keys.size());
        if (keys.isEmpty()) return out;
        boolean valid = members.validForRemoteWork();
        Map<PeerEndpoint, List<Integer>> bySource = new LinkedHashMap<>();
        List<ReadPlan> plans = new ArrayList<>(keys.size());
        for (int i = 0; i < keys.size(); i++) {
            StateKey key = keys.get(i);
            ReadPlan plan = new ReadPlan(key, false, false, valid ? candidates.known(key, scope.digest()) : List.of());
            plans.add(plan);
            out.add(null);
            Optional<PeerCandidate> first = plan.nextPeer();
            if (first.isEmpty()) {
                out.set(i, CompletableFuture.completedFuture(new StageResult.Miss(key, StageResult.MissReason.NOT_FOUND)));
            } else {
                bySource.computeIfAbsent(first.get().source(), s -> new ArrayList<>()).add(i);
            }
        }
        long startedNanos = observer.enabled() ? nanoClock.getAsLong() : 0;
        for (List<Integer> group : bySource.values()) {
            List<PeerCandidate> batch = new ArrayList<>(group.size());
            for (int i : group) batch.add(plans.get(i).nextPeer().orElseThrow());
            List<CompletableFuture<PeerReadResult>> read;
            try {
                read = reader.readBatch(batch, scope.namespaceId());
            } catch (RuntimeException e) {
                // the reader answers transport failures as values: a throw is a bug, and the group's pages are misses
                UnexpectedErrors.record(Layer.PEER, "PeerPages.fetchAll", "a miss (NOT_FOUND) for each page of the batch", e);
                read = null;
            }
            for (int j = 0; j < group.size(); j++) {
                int i = group.get(j);
                StateKey key = keys.get(i);
                StageResult.Miss miss = new StageResult.Miss(key, StageResult.MissReason.NOT_FOUND);
                if (read == null) {
                    out.set(i, CompletableFuture.completedFuture(miss));
                    continue;
                }
                ReadPlan plan = plans.get(i);
                CompletableFuture<PeerReadResult> page = read.get(j);
                out.set(i, orMiss("PeerPages.fetchAll", miss, () -> page
                        .thenCompose(r -> r instanceof PeerReadResult.Refused refused
                                ? fallBack(plan, refused, scope) : CompletableFuture.completedFuture(r))
                        .thenApply(r -> {
                            observe(r, startedNanos);
                            return stageResult(key, r);
                        })));
            }
        }
        return out;
    }

    /** Retries {@code plan} past {@code refused} on its next candidates; the refusal stands if none is left. */
    private CompletableFuture<PeerReadResult> fallBack(ReadPlan plan, PeerReadResult.Refused refused, SessionScope scope) {
        ReadPlan rest = refused.ownerWide() ? plan.withoutOwner(refused.from().ownerId()) : plan.without(refused.from());
        if (rest.nextPeer().isEmpty() || !members.validForRemoteWork()) return CompletableFuture.completedFuture(refused);
        return reader.readAll(List.of(rest), scope.namespaceId())
                .thenApply(b -> b.entries().getFirst().result().orElse(refused));
    }

    /**
     * A peer read's result as a staging result: refusals and misses before any payload byte
     * (membership, local DRAM, ticket length) are NOT_FOUND / busy, so the query may try another
     * source; a transfer that broke or failed verification is IO_ERROR / CORRUPT, so it may not.
     */
    static StageResult stageResult(StateKey key, PeerReadResult r) {
        return switch (r) {
            case PeerReadResult.Fetched f -> new StageResult.Staged(f.lease(), StageResult.Source.PEER_READ);
            case PeerReadResult.Refused refused -> new StageResult.Miss(key, StageResult.MissReason.NOT_FOUND);
            case PeerReadResult.Miss m -> switch (m.reason()) {
                case MEMBERSHIP_INVALID, LENGTH_MISMATCH -> new StageResult.Miss(key, StageResult.MissReason.NOT_FOUND);
                case LOCAL_DRAM_FULL -> new StageResult.Busy(StageResult.BusyReason.DRAM_FULL);
                case TRANSFER_BROKEN, TRANSFER_REFUSED -> new StageResult.Miss(key, StageResult.MissReason.IO_ERROR);
                case DISCARDED -> new StageResult.Miss(key, StageResult.MissReason.CORRUPT);
            };
        };
    }

    /** Records a fetch that moved payload: its serving owner's route sample (failures are censored). */
    private void observe(PeerReadResult r, long startedNanos) {
        if (!observer.enabled()) return;
        long now = nanoClock.getAsLong();
        switch (r) {
            case PeerReadResult.Fetched f -> observer.record(new Observation(
                    fetchKey(f.from(), SourceSelector.imageShape(f.lease().lengthBytes())), Terminal.SUCCEEDED,
                    new Timeline(startedNanos, startedNanos, startedNanos, now),
                    ByteCount.known(f.lease().lengthBytes()), ByteCount.known(f.lease().lengthBytes())));
            case PeerReadResult.Miss m -> observer.record(new Observation(
                    fetchKey(m.from(), SourceSelector.pageShape(pageBytesBudget)), Terminal.FAILED,
                    new Timeline(startedNanos, startedNanos, startedNanos, now), ByteCount.unknown(), ByteCount.unknown()));
            case PeerReadResult.Refused refused -> {
                // nothing was transferred: no sample
            }
        }
    }
}
