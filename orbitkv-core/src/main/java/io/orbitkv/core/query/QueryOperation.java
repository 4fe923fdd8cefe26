package io.orbitkv.core.query;

import io.orbitkv.core.cost.Terminal;
import io.orbitkv.core.storage.StageResult;
import io.orbitkv.core.storage.dram.DramTier;
import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.core.storage.dram.SlotRef;
import io.orbitkv.core.transfer.RestoreObservations;
import io.orbitkv.core.transfer.EngineRegion;
import io.orbitkv.state.RecoveryDemand;
import io.orbitkv.state.Requirement;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.Validation;
import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.PageEntries;
import io.orbitkv.state.protocol.PageState;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;

import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * One revision of one QUERY operation of a session (protocol §9.4-9.5): its selected boundary,
 * the leases on exactly the required pages, the stagings bringing SSD pages into DRAM, and the
 * restore copies into the engine's region.
 *
 * <p>Thread model: confined to the owning session's lock ({@link OperationHost#lock()}); the
 * session calls every method with it held, and I/O completions re-enter through
 * {@link OperationHost#callbacks()} and take it first. A RESTORE's copies ({@link RestoreBatch})
 * run without the lock, on the copier's threads or, for a small one, on the connection's thread
 * right after it let go of the lock, and read only final fields, the leases (held until the
 * copies drain) and the volatile {@code stopCopies}.
 *
 * <p>States, all transitions in {@link #transition}: PENDING (a catalog lookup of pages only
 * peers may hold, or stagings queued or running) →
 * FINAL (a hit whose pages are all RESIDENT/READY, or a miss holding nothing) → DRAINING
 * (cancelled, released, replaced or disconnected while I/O is submitted) → ENDED (nothing held).
 * PENDING or FINAL go straight to ENDED when nothing is in flight.
 *
 * <p>Invariants: leases are held on exactly the pages of the selected boundary's required ranges
 * (nothing else); {@code leaseTickets} from the global table equal the plan's page count while
 * the operation is not ENDED, and are zero after; staging bytes are taken from the budget before
 * a page is queued and given back when its staging ends or is dropped; a FINAL hit passed
 * {@link RecoveryDemand#validate(io.orbitkv.state.RecoveryContract, long)}; a failed staging
 * never becomes a hit: the boundary is selected again with that page missing.
 *
 * <p>Peer waits: a QUERY with {@code peer_wait_millis} > 0 whose boundary needs pages no local
 * tier holds asks the catalog about all of them at once and holds nothing meanwhile
 * ({@code discovering}); a timer at the wait bound stops the wait, gives up peer fetches in flight
 * ({@code abandoned} slots, counted in {@code abandonedInFlight} until they land and are released)
 * and plans from local tiers only ({@code localOnly}). See docs/manager-core.md, "First-query
 * peer hits".
 *
 * <p>Design note: a plan holds its DRAM leases from lookup to release instead of re-acquiring
 * after selection, so an eviction between selection and answer cannot turn a selected page into
 * a hole; the cost is that a lookup of a page the boundary does not need briefly pins it (one
 * CAS each way). Stagings are submitted at most {@code stagesPerOperation} (64) at a time, so a
 * CANCEL of a 65,536-page PENDING query drops the unsubmitted rest without any I/O and waits only
 * for the ≤ 64 reads already submitted.
 */
public final class QueryOperation {

    /**
     * Keys one QUERY asks the catalog about at once when it waits for peers (32 bytes each on the
     * wire; a 65,536-page query asks for its first 4,096 missing pages).
     */
    static final int MAX_DISCOVERED_KEYS = 4_096;

    /** The operation's life; see the class comment. */
    public enum State { PENDING, FINAL, DRAINING, ENDED }

    /** The answer to CANCEL/RELEASE: pages released now, and whether the operation is gone. */
    public record Stopped(int pagesReleased, boolean drained) {
    }

    private final OperationHost host;
    private final Request.Query query;
    private final SessionScope scope;
    private final Set<StateKey> excluded = new HashSet<>();
    private final ArrayDeque<PageSlot> queue = new ArrayDeque<>();
    private State state = State.PENDING;
    private boolean hit;
    private long boundaryTokens;
    private List<Requirement> required = List.of();
    private List<QueryPlan.SlotSpan> spans = List.of();
    private List<Reply.GroupResult> missGroups = List.of();
    private long leaseTickets;
    private int stagingInFlight;
    /** A RESTORE's copies are running (inline on the connection's thread or on the copier) and not reported yet. */
    private boolean restoreInFlight;
    /** Cost sample of the restore in flight: accepted instant (0 when observations are off), bytes, pages. */
    private long restoreAcceptedNanos;
    private long restoreLogicalBytes;
    private int restorePages;
    private final List<PageSlot> copying = new ArrayList<>();
    private volatile boolean stopCopies;
    private int replans;
    private boolean pendingReplied;
    private boolean drainedEventWanted;
    private SourceSelector sources;
    /** A catalog lookup of this revision's missing pages is in flight (PENDING, nothing held for it). */
    private boolean discovering;
    /** Past the peer wait bound: plans use local tiers only. */
    private boolean localOnly;
    /** Peer fetches given up at the wait bound that have not landed yet (their results are released). */
    private int abandonedInFlight;
    /** Peer fetches of this operation in flight (one batch at a time). */
    private int remoteInFlight;
    private Runnable cancelWaitTimer = () -> { };
    /** This revision waited (or waits) for peers and its end is not counted yet. */
    private boolean peerWaitOpen;
    /** When the QUERY arrived ({@link OperationHost#nanoTime()}), for the query latency histogram. */
    private final long arrivedNanos;
    /** When the RESTORE in flight was accepted, for the restore latency histogram. */
    private long restoreStartedNanos;

    public QueryOperation(OperationHost host, Request.Query query, SessionScope scope) {
        this.host = Objects.requireNonNull(host, "host");
        this.query = Objects.requireNonNull(query, "query");
        this.scope = Objects.requireNonNull(scope, "scope");
        this.boundaryTokens = query.originTokens();
        this.arrivedNanos = host.nanoTime();
    }

    public long operationId() {
        return query.operationId();
    }

    public int revision() {
        return query.revision();
    }

    public State state() {
        return state;
    }

    /** Leases this operation holds now. */
    public int leasesHeld() {
        int n = 0;
        for (QueryPlan.SlotSpan s : spans) for (PageSlot p : s.pages()) if (p.lease != null) n++;
        return n;
    }

    /**
     * Plans the query (the longest legal boundary, or a shorter DRAM-only one when
     * {@link BoundaryChooser} estimates its first token clearly sooner) and takes what it needs;
     * returns the ERROR to answer instead (BUSY: the lease table is full; NO_SPACE: only
     * stagings beyond the budget could make a hit), in which case the operation holds nothing
     * and must be dropped.
     */
    public Optional<Reply.Error> start() {
        QueryPlan plan = host.planner().plan(query, scope, excluded, QueryPlanner.Sources.ALL, Long.MAX_VALUE);
        if (waitsForPeers(plan)) {
            host.countPending();
            return Optional.empty();
        }
        if (plan instanceof QueryPlan.Hit full) plan = BoundaryChooser.choose(full, query, scope, excluded, host);
        Optional<Reply.Error> refused = adopt(plan);
        if (refused.isEmpty()) {
            if (state == State.PENDING) host.countPending();
            else countSettled();
        }
        return refused;
    }

    /**
     * First-query peer hits: when the QUERY may wait ({@code peer_wait_millis} > 0, capped by the
     * Manager's maximum) and pages beyond {@code plan}'s boundary are held by no local tier, lets
     * {@code plan} go, asks the catalog where all of those pages are (one batch), and answers
     * PENDING; {@link #onDiscovered} plans again with the answers, {@link #onWaitExpired} settles
     * with what is local when the bound passes first. True if it started waiting.
     */
    private boolean waitsForPeers(QueryPlan plan) {
        long waitNanos = Math.min(TimeUnit.MILLISECONDS.toNanos(query.peerWaitMillis()), host.peerWaitMaxNanos());
        RemotePages remote = host.planner().remote();
        if (!remote.discoverable()) return false;
        List<StateKey> missing = host.planner().missingLocally(query, scope, plan, MAX_DISCOVERED_KEYS);
        if (missing.isEmpty()) return false;
        if (waitNanos <= 0) {
            // No wait: answer from what is known now, and look the whole missing prefix up in the
            // background so that the next QUERY finds every peer page, not one more page per QUERY.
            remote.discover(missing, scope);
            return false;
        }
        if (plan instanceof QueryPlan.Hit h) h.releaseAll();
        discovering = true;
        peerWaitOpen = true;
        cancelWaitTimer = host.schedule(() -> {
            synchronized (host.lock()) {
                onWaitExpired();
            }
        }, waitNanos);
        remote.discover(missing, scope).whenCompleteAsync((ignored, failure) -> {
            synchronized (host.lock()) {
                onDiscovered();
            }
        }, host.callbacks());
        return true;
    }

    /** The catalog answered (or its deadline passed): plan again with the peers it named. */
    private void onDiscovered() {
        if (state != State.PENDING || !discovering) return;
        discovering = false;
        QueryPlan plan = host.planner().plan(query, scope, excluded, planSources(), Long.MAX_VALUE);
        if (plan instanceof QueryPlan.Hit full) plan = BoundaryChooser.choose(full, query, scope, excluded, host);
        if (adopt(plan).isPresent()) settleMiss(List.of());
        settledCheck();
    }

    /**
     * The peer wait bound passed while still PENDING: stop waiting for the catalog, give up peer
     * fetches in flight (their results are released when they land; a batch never left half
     * adopted) and settle with what local tiers hold, pages that already arrived from peers
     * included.
     */
    private void onWaitExpired() {
        if (state != State.PENDING || localOnly) return;
        localOnly = true;
        endPeerWait(OperationHost.PeerWaitOutcome.EXPIRED);
        boolean wasDiscovering = discovering;
        discovering = false;
        boolean peersPending = false;
        for (QueryPlan.SlotSpan s : spans) {
            for (PageSlot p : s.pages()) {
                if (!p.remote) continue;
                if (p.state == PageSlot.State.QUEUED) {
                    queue.remove(p);
                    host.stagingBytes().release(p.stagingBytes);
                    p.stagingBytes = 0;
                    p.state = PageSlot.State.FAILED;
                    peersPending = true;
                } else if (p.state == PageSlot.State.STAGING) {
                    p.abandoned = true;
                    p.state = PageSlot.State.FAILED;
                    stagingInFlight--;
                    remoteInFlight--;
                    abandonedInFlight++;
                    peersPending = true;
                }
            }
        }
        if (wasDiscovering) {
            QueryPlan plan = host.planner().plan(query, scope, excluded, planSources(), Long.MAX_VALUE);
            if (plan instanceof QueryPlan.Hit full) plan = BoundaryChooser.choose(full, query, scope, excluded, host);
            if (adopt(plan).isPresent()) settleMiss(List.of());
        } else if (peersPending && stagingInFlight == 0 && queue.isEmpty()) {
            replan();
        }
        settledCheck();
    }

    private void endPeerWait(OperationHost.PeerWaitOutcome outcome) {
        if (!peerWaitOpen) return;
        peerWaitOpen = false;
        host.countPeerWait(outcome);
    }

    private QueryPlanner.Sources planSources() {
        return localOnly ? QueryPlanner.Sources.LOCAL : QueryPlanner.Sources.ALL;
    }

    /** After a change that may have settled a PENDING answer: count it and tell the client. */
    private void settledCheck() {
        if (state == State.PENDING) return;
        cancelWaitTimer.run();
        endPeerWait(OperationHost.PeerWaitOutcome.SETTLED);
        countSettled();
        if (pendingReplied) {
            host.emit(new Reply.Completion(operationId(), revision(), CompletionEvent.QUERY_SETTLED, Reply.Settled.OK));
        }
    }

    /** The current QUERY_RESULT (PENDING while stagings run, else FINAL). */
    public Reply.QueryResult result() {
        QueryStatus status = state == State.PENDING ? QueryStatus.PENDING : QueryStatus.FINAL;
        if (state == State.PENDING) pendingReplied = true;
        if (!hit) return new Reply.QueryResult(operationId(), revision(), status, false, boundaryTokens, missGroups);
        List<Reply.GroupResult> groups = new ArrayList<>(scope.contract().groups().size());
        for (StateGroup g : scope.contract().groups()) {
            List<Reply.Span> out = new ArrayList<>(2);
            for (QueryPlan.SlotSpan s : spans) {
                if (s.groupId() != g.id()) continue;
                PageEntries.Builder pages = PageEntries.builder(s.pages().length);
                for (PageSlot p : s.pages()) addEntry(p, pages);
                out.add(new Reply.Span(s.firstPage(), pages.build()));
            }
            groups.add(new Reply.GroupResult(g.id(), out));
        }
        return new Reply.QueryResult(operationId(), revision(), status, true, boundaryTokens, groups);
    }

    /** {@code p}'s entry, packed (no object per page: a 1,024-page hit is answered per QUERY). */
    private static void addEntry(PageSlot p, PageEntries.Builder out) {
        switch (p.state) {
            case RESIDENT -> {
                SlotRef ref = p.lease.slotRef();
                out.resident(ref.classIndex(), ref.offsetBytes(), ref.lengthBytes());
            }
            case QUEUED, STAGING -> out.unleased(PageState.RESERVED);
            case FAILED -> out.unleased(PageState.MISS);
            case READY -> out.unleased(PageState.READY);
        }
    }

    // ---- planning --------------------------------------------------------------------------

    /** Takes {@code plan} as the operation's selection; on refusal holds nothing and says why. */
    private Optional<Reply.Error> adopt(QueryPlan plan) {
        switch (plan) {
            case QueryPlan.Miss miss -> {
                settleMiss(miss.groups());
                return Optional.empty();
            }
            case QueryPlan.Hit h -> {
                if (!host.leases().tryAcquire(h.pageCount())) {
                    h.releaseAll();
                    return Optional.of(new Reply.Error(ErrorCode.BUSY, "lease table full ("
                            + host.leases().used() + " of " + host.leases().capacity() + " leases)"));
                }
                long bytes = h.stagingBytes();
                if (!host.stagingBytes().tryAcquire(bytes)) {
                    h.releaseAll();
                    host.leases().release(h.pageCount());
                    return adoptWithin(bytes);
                }
                leaseTickets = h.pageCount();
                hit = true;
                boundaryTokens = h.boundaryTokens();
                required = h.required();
                spans = h.spans();
                for (QueryPlan.SlotSpan s : spans) {
                    for (PageSlot p : s.pages()) if (p.state == PageSlot.State.QUEUED) queue.add(p);
                }
                if (queue.isEmpty()) finishHit();
                else pump();
                return Optional.empty();
            }
        }
    }

    /**
     * The staging set ({@code refusedBytes}) did not fit the budget: select again with the pages to
     * stage capped at what the budget has left now (the longest legal boundary that fits); if that
     * stages no less, from DRAM-resident pages only. Terminates: each retry stages strictly fewer bytes.
     */
    private Optional<Reply.Error> adoptWithin(long refusedBytes) {
        QueryPlan capped = host.planner().plan(query, scope, excluded, planSources(), host.stagingBytes().available());
        if (capped instanceof QueryPlan.Hit h) {
            if (h.stagingBytes() < refusedBytes) return adopt(capped);
            h.releaseAll();
        }
        return adoptFromDram(refusedBytes);
    }

    /**
     * The staging set did not fit the budget: select again from DRAM-resident pages only (a
     * shorter boundary, or a miss). NO_SPACE only when SSD pages could have made a hit and DRAM
     * alone cannot.
     */
    private Optional<Reply.Error> adoptFromDram(long refusedBytes) {
        QueryPlan fallback = host.planner().plan(query, scope, excluded, QueryPlanner.Sources.DRAM, 0);
        if (fallback instanceof QueryPlan.Miss) {
            return Optional.of(new Reply.Error(ErrorCode.NO_SPACE, "staging " + refusedBytes
                    + " bytes from SSD does not fit the staging budget (" + host.stagingBytes() + ")"));
        }
        return adopt(fallback);
    }

    /**
     * Submits queued stagings: local pages (SSD, or a peer after a local refusal) one by one up to
     * {@code stagesPerOperation} in flight; pages only peers hold in one {@link RemotePages#fetchAll}
     * batch (one request per source), the next batch when the previous one has landed.
     */
    private void pump() {
        List<PageSlot> peers = new ArrayList<>();
        int peerBatch = remoteInFlight == 0 ? host.stagesPerOperation() : 0;
        int window = host.stagesPerOperation();
        for (java.util.Iterator<PageSlot> it = queue.iterator(); state == State.PENDING && it.hasNext(); ) {
            PageSlot slot = it.next();
            if (slot.remote ? peers.size() >= peerBatch : stagingInFlight - remoteInFlight >= window) continue;
            it.remove();
            slot.state = PageSlot.State.STAGING;
            stagingInFlight++;
            if (slot.remote) {
                peers.add(slot);
                continue;
            }
            sources().stage(SourceSelector.routes(host.store(), host.planner().remote(), slot.key, scope, slot.stagingBytes),
                            new StageResult.Miss(slot.key, StageResult.MissReason.NOT_FOUND))
                    .whenCompleteAsync((result, failure) -> {
                synchronized (host.lock()) {
                    onStaged(slot, result);
                }
            }, host.callbacks());
        }
        if (peers.isEmpty()) return;
        remoteInFlight += peers.size();
        List<StateKey> keys = new ArrayList<>(peers.size());
        for (PageSlot p : peers) keys.add(p.key);
        List<CompletableFuture<StageResult>> fetches;
        try {
            fetches = host.planner().remote().fetchAll(keys, scope);
        } catch (RuntimeException e) {
            fetches = List.of();
        }
        for (int i = 0; i < peers.size(); i++) {
            PageSlot slot = peers.get(i);
            CompletableFuture<StageResult> f = i < fetches.size() ? fetches.get(i)
                    : CompletableFuture.completedFuture(new StageResult.Miss(slot.key, StageResult.MissReason.NOT_FOUND));
            f.whenCompleteAsync((result, failure) -> {
                synchronized (host.lock()) {
                    onStaged(slot, result);
                }
            }, host.callbacks());
        }
    }

    private SourceSelector sources() {
        if (sources == null) sources = new SourceSelector(host.store().costObserver());
        return sources;
    }

    private void onStaged(PageSlot slot, StageResult result) {
        host.stagingBytes().release(slot.stagingBytes);
        slot.stagingBytes = 0;
        Lease lease = result instanceof StageResult.Staged(Lease l, StageResult.Source ignored) ? l : null;
        if (slot.abandoned) {
            abandonedInFlight--;
            if (lease != null) lease.release();
            drainCheck();
            return;
        }
        stagingInFlight--;
        if (slot.remote) remoteInFlight--;
        if (state != State.PENDING || slot.state != PageSlot.State.STAGING) {
            if (lease != null) lease.release();
            drainCheck();
            return;
        }
        if (lease != null && lease.namespaceId() == scope.namespaceId()) {
            slot.lease = lease;
            slot.state = PageSlot.State.RESIDENT;
            slot.tier = tierOf(((StageResult.Staged) result).source());
        } else {
            if (lease != null) lease.release();
            slot.state = PageSlot.State.FAILED;
            excluded.add(slot.key);
        }
        if (stagingInFlight > 0 || !queue.isEmpty()) {
            pump();
            return;
        }
        if (anyFailed()) replan();
        else finishHit();
        settledCheck();
    }

    private boolean anyFailed() {
        for (QueryPlan.SlotSpan s : spans) for (PageSlot p : s.pages()) if (p.state == PageSlot.State.FAILED) return true;
        return false;
    }

    /**
     * A staging failed: select again with the failed keys missing. The old leases are kept until
     * the new plan has taken its own, so pages both need stay pinned in DRAM meanwhile.
     */
    private void replan() {
        List<QueryPlan.SlotSpan> old = spans;
        long oldTickets = leaseTickets;
        leaseTickets = 0;
        spans = List.of();
        hit = false;
        boolean retry = replans++ < host.maxReplans();
        QueryPlan plan = retry
                ? host.planner().plan(query, scope, excluded, planSources(), Long.MAX_VALUE)
                : new QueryPlan.Miss(List.of());
        host.leases().release(oldTickets);
        if (adopt(plan).isPresent()) settleMiss(List.of());
        for (QueryPlan.SlotSpan s : old) for (PageSlot p : s.pages()) p.releaseLease();
    }

    private void finishHit() {
        Validation v = new RecoveryDemand(scope.contract().pageTokens(), query.originTokens(), boundaryTokens, required)
                .validate(scope.contract(), query.promptTokens());
        if (v instanceof Validation.Rejected(String reason)) {
            // Defence in depth: a demand the contract rejects is never served as a hit.
            System.getLogger(QueryOperation.class.getName()).log(System.Logger.Level.ERROR,
                    "selected demand rejected (bug), answering a miss: " + reason);
            releaseAllLeases();
            settleMiss(List.of());
            return;
        }
        transition(State.FINAL);
    }

    private void settleMiss(List<Reply.GroupResult> groups) {
        releaseAllLeases();
        host.leases().release(leaseTickets);
        leaseTickets = 0;
        hit = false;
        boundaryTokens = query.originTokens();
        required = List.of();
        spans = List.of();
        missGroups = groups;
        transition(State.FINAL);
    }

    private void countSettled() {
        // Per-tier sums in locals and a presized key array: a settled 1,024-page hit is counted on
        // every QUERY, and a record per page plus list growth was a sixth of the Manager's QUERY
        // time in a bench-manager profile.
        long[] pageCounts = new long[OperationHost.Tier.values().length];
        long[] byteCounts = new long[pageCounts.length];
        StateKey[] leased = new StateKey[hit ? leasesHeld() : 0];
        int n = 0;
        if (hit) {
            for (QueryPlan.SlotSpan s : spans) {
                for (PageSlot p : s.pages()) {
                    if (p.lease == null) continue;
                    leased[n++] = p.key;
                    pageCounts[p.tier.ordinal()]++;
                    byteCounts[p.tier.ordinal()] += p.lease.lengthBytes();
                }
            }
        }
        OperationHost.TierCounts pages = tierCounts(pageCounts);
        OperationHost.TierCounts bytes = tierCounts(byteCounts);
        long queried = Math.max(0, query.promptTokens() - query.originTokens());
        long hitTokens = hit ? Math.min(queried, Math.max(0, boundaryTokens - query.originTokens())) : 0;
        host.countSettled(new OperationHost.SettledQuery(hit, queried, hitTokens, pages, bytes,
                Math.max(0, host.nanoTime() - arrivedNanos), java.util.Arrays.asList(leased)));
    }

    private static OperationHost.TierCounts tierCounts(long[] byTier) {
        return new OperationHost.TierCounts(byTier[OperationHost.Tier.DRAM.ordinal()],
                byTier[OperationHost.Tier.SSD.ordinal()], byTier[OperationHost.Tier.PEER.ordinal()]);
    }

    private static OperationHost.Tier tierOf(StageResult.Source source) {
        return switch (source) {
            case DRAM_HIT -> OperationHost.Tier.DRAM;
            case SSD_READ, SHARED_READ -> OperationHost.Tier.SSD;
            case PEER_READ -> OperationHost.Tier.PEER;
        };
    }

    // ---- restore ---------------------------------------------------------------------------

    /**
     * What a RESTORE started: the reply (RESTORE_ACCEPTED or the ERROR of protocol §5.8) and, for
     * a restore of at most {@link OperationHost#restoreInlineBytes()}, the copy the caller runs
     * right after it lets go of the session lock ({@code copyHere}; a no-op otherwise). Either way
     * COMPLETION RESTORE_DONE follows once every page was copied.
     */
    public record Restoring(Reply reply, Runnable copyHere) {
        static Restoring refused(Reply.Error error) {
            return new Restoring(error, () -> { });
        }
    }

    /**
     * Checks a RESTORE into {@code region} and starts its copies: a small one (by bytes) on the
     * caller's thread through {@link Restoring#copyHere}, a larger one as copier tasks.
     */
    public Restoring restore(Request.Restore request, EngineRegion region) {
        Optional<Reply.Error> refused = restoreRefusal(request, region);
        if (refused.isPresent()) return Restoring.refused(refused.get());
        List<PageSlot> sources = new ArrayList<>(request.pages().size());
        List<MemorySegment> targets = new ArrayList<>(request.pages().size());
        long bytes = 0;
        for (Request.RestorePage rp : request.pages()) {
            PageSlot slot = find(rp.groupId(), rp.sourcePage()).orElseThrow();
            sources.add(slot);
            targets.add(region.page(rp.destinationPage(), slot.lease.lengthBytes()));
            bytes += slot.lease.lengthBytes();
        }
        boolean inline = bytes <= host.restoreInlineBytes();
        RestoreBatch batch = new RestoreBatch(sources, targets, region, () -> stopCopies, copied -> {
            if (inline) {
                synchronized (host.lock()) {
                    onCopied(copied);
                }
            } else {
                // a copy thread never waits on a session lock: one hop per batch, by its last share
                host.callbacks().execute(() -> {
                    synchronized (host.lock()) {
                        onCopied(copied);
                    }
                });
            }
        });
        if (!inline && !host.copier().trySubmit(batch.shares(host.copier().parallelism()))) {
            return Restoring.refused(new Reply.Error(ErrorCode.BUSY, "restore copy queue is full"));
        }
        restoreInFlight = true;
        restoreStartedNanos = host.nanoTime();
        restoreAcceptedNanos = restoreObservations().enabled() ? System.nanoTime() : 0;
        restorePages = sources.size();
        restoreLogicalBytes = bytes;
        copying.clear();
        copying.addAll(sources);
        return new Restoring(new Reply.RestoreAccepted(operationId(), request.pages().size()),
                inline ? batch::copyAll : () -> { });
    }

    /** Why a RESTORE is refused before any byte of the region is written, if it is. */
    private Optional<Reply.Error> restoreRefusal(Request.Restore request, EngineRegion region) {
        if (query.target() != CompletionTarget.ENGINE_RESTORE) {
            return Optional.of(new Reply.Error(ErrorCode.INVALID_DEMAND, "operation " + operationId() + " targets HOST_READY"));
        }
        if (state != State.FINAL || !hit) {
            return Optional.of(new Reply.Error(ErrorCode.INVALID_DEMAND, "operation " + operationId() + " is not a FINAL hit"));
        }
        if (restoreInFlight) {
            return Optional.of(new Reply.Error(ErrorCode.BUSY, "a restore of operation " + operationId() + " is in flight"));
        }
        if (region.isFaulted()) {
            return Optional.of(new Reply.Error(ErrorCode.NOT_FOUND, "region " + request.regionId() + " is unusable: a copy"
                    + " into it faulted (its file shrank or was replaced after REGISTER_REGION); register it again"));
        }
        for (Request.RestorePage rp : request.pages()) {
            Optional<PageSlot> slot = find(rp.groupId(), rp.sourcePage());
            if (slot.isEmpty() || slot.get().lease == null) {
                return Optional.of(new Reply.Error(ErrorCode.NOT_FOUND, "source page " + rp.sourcePage() + " of group "
                        + rp.groupId() + " is not leased by operation " + operationId()));
            }
            if (rp.destinationPage() >= region.pageCount()) {
                return Optional.of(new Reply.Error(ErrorCode.INVALID_DEMAND, "destination page " + rp.destinationPage()
                        + " is outside the region's " + region.pageCount() + " pages"));
            }
            if (slot.get().lease.lengthBytes() > region.pageBytes()) {
                return Optional.of(new Reply.Error(ErrorCode.NAMESPACE_MISMATCH, "page image of "
                        + slot.get().lease.lengthBytes() + " bytes exceeds the region's page_bytes " + region.pageBytes()));
            }
            // A READY page was copied and fenced by an earlier RESTORE of this operation: the protocol
            // restores each leased page once (its source must be RESIDENT), so a repeat is refused
            // before any byte of the region is written again.
            if (slot.get().state == PageSlot.State.READY) {
                return Optional.of(new Reply.Error(ErrorCode.INVALID_DEMAND, "source page " + rp.sourcePage() + " of group "
                        + rp.groupId() + " is READY: operation " + operationId() + " restored it already"));
            }
        }
        return Optional.empty();
    }

    /** Every copy of the RESTORE in flight ended: mark its pages READY, count it, send RESTORE_DONE. */
    private void onCopied(RestoreBatch.Copied copied) {
        restoreInFlight = false;
        Reply.Outcome outcome;
        Terminal terminal;
        if (state == State.FINAL && !copied.failed()) {
            for (PageSlot p : copying) p.state = PageSlot.State.READY;
            outcome = Reply.Settled.OK;
            terminal = Terminal.SUCCEEDED;
        } else {
            outcome = state == State.FINAL
                    ? new Reply.Failed(copied.regionFault() ? ErrorCode.NOT_FOUND : ErrorCode.INTERNAL)
                    : Reply.Settled.CANCELLED;
            terminal = state == State.FINAL ? Terminal.FAILED : Terminal.CANCELLED;
        }
        host.countRestore(switch (terminal) {
            case SUCCEEDED -> OperationHost.RestoreOutcome.OK;
            case CANCELLED -> OperationHost.RestoreOutcome.CANCELLED;
            case FAILED, TIMED_OUT -> OperationHost.RestoreOutcome.FAILED;
        }, copied.byTier(), Math.max(0, host.nanoTime() - restoreStartedNanos));
        RestoreObservations observations = restoreObservations();
        if (observations.enabled()) {
            observations.restored(terminal, restoreLogicalBytes, restorePages, copied.bytes(), restoreAcceptedNanos,
                    System.nanoTime());
        }
        copying.clear();
        host.emit(new Reply.Completion(operationId(), revision(), CompletionEvent.RESTORE_DONE, outcome));
        drainCheck();
    }

    private RestoreObservations restoreObservations() {
        return new RestoreObservations(host.store().costObserver(), host.copier().costResource());
    }

    private Optional<PageSlot> find(int groupId, long page) {
        for (QueryPlan.SlotSpan s : spans) {
            if (s.groupId() == groupId && page >= s.firstPage() && page < s.firstPage() + s.pages().length) {
                return Optional.of(s.pages()[(int) (page - s.firstPage())]);
            }
        }
        return Optional.empty();
    }

    // ---- ending ----------------------------------------------------------------------------

    /**
     * CANCEL, RELEASE, replacement by a new revision or disconnect: drops queued stagings at once,
     * stops unstarted copies, releases every lease no submitted I/O still reads; the rest is
     * released when that I/O drains. {@code notifyDrained}: send COMPLETION DRAINED then.
     */
    public Stopped stop(boolean notifyDrained) {
        if (state == State.ENDED || state == State.DRAINING) return new Stopped(0, state == State.ENDED);
        stopCopies = true;
        discovering = false;
        cancelWaitTimer.run();
        endPeerWait(OperationHost.PeerWaitOutcome.STOPPED);
        for (PageSlot p : queue) {
            host.stagingBytes().release(p.stagingBytes);
            p.stagingBytes = 0;
            p.state = PageSlot.State.FAILED;
        }
        queue.clear();
        int released = restoreInFlight ? 0 : releaseAllLeases();
        transition(State.DRAINING);
        drainedEventWanted = notifyDrained;
        boolean drained = drainCheckQuietly();
        return new Stopped(released, drained);
    }

    private void drainCheck() {
        if (state != State.DRAINING) return;
        if (drainCheckQuietly() && drainedEventWanted) {
            host.emit(new Reply.Completion(operationId(), revision(), CompletionEvent.DRAINED, Reply.Settled.OK));
        }
    }

    /** Ends the operation if nothing is in flight; true if it is ENDED now. */
    private boolean drainCheckQuietly() {
        if (stagingInFlight > 0 || restoreInFlight || abandonedInFlight > 0) return false;
        releaseAllLeases();
        host.leases().release(leaseTickets);
        leaseTickets = 0;
        transition(State.ENDED);
        host.ended(this);
        return true;
    }

    /** Releases every lease of the plan in bulk ({@link DramTier#releaseAll}: a lock trip per run, not per page). */
    private int releaseAllLeases() {
        int held = 0;
        for (QueryPlan.SlotSpan s : spans) for (PageSlot p : s.pages()) if (p.lease != null) held++;
        if (held == 0) return 0;
        Lease[] leases = new Lease[held];
        int n = 0;
        for (QueryPlan.SlotSpan s : spans) {
            for (PageSlot p : s.pages()) {
                if (p.lease != null) {
                    leases[n++] = p.lease;
                    p.lease = null;
                }
            }
        }
        host.store().dram().releaseAll(leases, n);
        return n;
    }

    private void transition(State next) {
        boolean legal = switch (state) {
            case PENDING -> next == State.FINAL || next == State.PENDING || next == State.DRAINING;
            case FINAL -> next == State.DRAINING || next == State.FINAL;
            case DRAINING -> next == State.ENDED;
            case ENDED -> false;
        };
        if (!legal) throw new IllegalStateException("operation " + operationId() + ": " + state + " -> " + next);
        state = next;
    }
}
