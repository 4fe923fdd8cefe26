package io.orbitkv.core.query;

import io.orbitkv.core.log.UnexpectedErrors;
import io.orbitkv.core.storage.StageResult;
import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.core.transfer.EngineRegion;
import io.orbitkv.state.RecoveryDemand;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.Validation;
import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;

import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;

/**
 * One revision of one QUERY operation of a session (protocol §9.4-9.5): its selected boundary and
 * the leases on exactly the required pages. Three parts it owns run their own small state
 * machines: the {@link PeerWait} (catalog lookup, timer, abandoned fetches), the
 * {@link StagingPump} (queue and window of stagings into DRAM) and the {@link Restorer} (the
 * RESTORE in flight).
 *
 * <p>Thread model: confined to the owning session's lock ({@link SessionCallback#lock()}); the
 * session calls every method with it held, and I/O completions and timers re-enter through
 * {@link QueryServices#callbacks()} and take it first. A RESTORE's copies run without the lock
 * (see {@link Restorer}). Time comes from {@link QueryServices#clock()} only.
 *
 * <p>States, all transitions in {@link #transition}: PENDING (a catalog lookup of pages only
 * peers may hold, or stagings queued or running) → FINAL (a hit whose pages are all
 * RESIDENT/READY, or a miss holding nothing) → DRAINING (cancelled, released, replaced or
 * disconnected while I/O is submitted) → ENDED (nothing held). PENDING or FINAL go straight to
 * ENDED when nothing is in flight.
 *
 * <p>Invariants: leases are held on exactly the pages of the selected boundary's required ranges
 * (nothing else); {@code leaseTickets} from the global table equal the plan's page count while
 * the operation is not ENDED, and are zero after; staging bytes are taken from the budget before
 * a page is queued and given back when its staging ends or is dropped; a FINAL hit passed
 * {@link RecoveryDemand#validate(io.orbitkv.state.RecoveryContract, long)}; a failed staging
 * never becomes a hit: the boundary is selected again with that page missing.
 *
 * <p>Design note: a plan holds its DRAM leases from lookup to release instead of re-acquiring
 * after selection, so an eviction between selection and answer cannot turn a selected page into
 * a hole; the cost is that a lookup of a page the boundary does not need briefly pins it (one
 * CAS each way). The parts are separate objects, not flags of this one, so that each transition
 * is checked where it happens and a new concern cannot read another's half-updated state.
 */
public final class QueryOperation {

    /** The operation's life; see the class comment. */
    public enum State { PENDING, FINAL, DRAINING, ENDED }

    /** The completion the client is owed when the operation next moves: at most one. */
    private enum Owed { NOTHING, QUERY_SETTLED, DRAINED }

    /** The answer to CANCEL/RELEASE: pages released now, and whether the operation is gone. */
    public record Stopped(int pagesReleased, boolean drained) {
    }

    /**
     * What a RESTORE started: the reply (RESTORE_ACCEPTED or the ERROR of protocol §5.8) and, for
     * a restore of at most {@link QueryServices.Bounds#restoreInlineBytes()}, the copy the caller
     * runs right after it lets go of the session lock ({@code copyHere}; a no-op otherwise).
     * Either way COMPLETION RESTORE_DONE follows once every page was copied.
     */
    public record Restoring(Reply reply, Runnable copyHere) {
        static Restoring refused(Reply.Error error) {
            return new Restoring(error, () -> { });
        }
    }

    private final QueryServices services;
    private final SessionCallback session;
    private final Request.Query query;
    private final SessionScope scope;
    /** When the QUERY arrived, for the query latency histogram. */
    private final long arrivedNanos;
    /** Keys whose staging failed: missing for every later plan of this revision. */
    private final Set<StateKey> excluded = new HashSet<>();
    private final PeerWait peerWait;
    private final StagingPump pump;
    private final Restorer restorer;
    private State state = State.PENDING;
    private Owed owed = Owed.NOTHING;
    /** The selected plan: a hit whose leases this holds, or a miss (holding nothing). */
    private QueryPlan selected = new QueryPlan.Miss(List.of());
    /** Lease table entries taken for {@code selected}. */
    private long leaseTickets;
    private int replans;

    public QueryOperation(QueryServices services, SessionCallback session, Request.Query query, SessionScope scope) {
        this.services = Objects.requireNonNull(services, "services");
        this.session = Objects.requireNonNull(session, "session");
        this.query = Objects.requireNonNull(query, "query");
        this.scope = Objects.requireNonNull(scope, "scope");
        this.arrivedNanos = services.clock().getAsLong();
        this.peerWait = new PeerWait(services, session, query, scope, arrivedNanos, this::onDiscovered, this::onWaitExpired);
        this.pump = new StagingPump(services, session, scope, this::onStaged);
        this.restorer = new Restorer(services, session, query.operationId(), query.revision(), this::drainCheck);
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

    /**
     * Plans the query (the longest legal boundary, or a shorter DRAM-only one when
     * {@link BoundaryChooser} estimates its first token clearly sooner) and takes what it needs,
     * or starts a {@link PeerWait}; returns the ERROR to answer instead (BUSY: the lease table is
     * full; NO_SPACE: only stagings beyond the budget could make a hit), in which case the
     * operation holds nothing and must be dropped.
     */
    public Optional<Reply.Error> start() {
        QueryPlan plan = plan(QueryPlanner.Sources.ALL, Long.MAX_VALUE);
        if (peerWait.start(plan)) {
            services.metrics().countPending();
            return Optional.empty();
        }
        Optional<Reply.Error> refused = adopt(chosen(plan));
        if (refused.isEmpty()) {
            if (state == State.PENDING) services.metrics().countPending();
            else countSettled();
        }
        return refused;
    }

    /** The catalog answered (or its deadline passed): plan again with the peers it named. */
    private void onDiscovered() {
        if (state != State.PENDING || !peerWait.discovered()) return;
        adoptOrMiss(chosen(plan(peerWait.sources(), Long.MAX_VALUE)));
        settledCheck();
    }

    /**
     * The peer wait bound passed while still PENDING: plan from local tiers if the catalog had not
     * answered, else give up the peer fetches not landed and select again once nothing else is
     * staging, so the answer settles with what local tiers hold (pages that already arrived from
     * peers included).
     */
    private void onWaitExpired() {
        if (state != State.PENDING) return;
        switch (peerWait.expire()) {
            case NONE, EXPIRED, ENDED -> {
                return;
            }
            case DISCOVERING -> adoptOrMiss(chosen(plan(peerWait.sources(), Long.MAX_VALUE)));
            case WAITING -> {
                if (peerWait.abandonFetches(spans(), pump) && !pump.busy()) replan();
            }
        }
        settledCheck();
    }

    /** After a change that may have settled a PENDING answer: count it and tell the client. */
    private void settledCheck() {
        if (state == State.PENDING) return;
        peerWait.settled();
        countSettled();
        if (owed == Owed.QUERY_SETTLED) {
            owed = Owed.NOTHING;
            session.emit(new Reply.Completion(operationId(), revision(), CompletionEvent.QUERY_SETTLED, Reply.Settled.OK));
        }
    }

    /**
     * Per group of the selected hit, the key of its last required page (where the matched prefix
     * ends); empty for a miss. A chain-aware DRAM policy hangs the session's next publish run of
     * the group under it.
     */
    public Map<Integer, StateKey> lastHitPages() {
        if (!(selected instanceof QueryPlan.Hit hit)) return Map.of();
        Map<Integer, StateKey> last = new HashMap<>();
        Map<Integer, Long> lastPage = new HashMap<>();
        for (QueryPlan.SlotSpan span : hit.spans()) {
            PageSlot tail = span.pages()[span.pages().length - 1];
            Long seen = lastPage.get(span.groupId());
            if (seen == null || tail.page > seen) {
                lastPage.put(span.groupId(), tail.page);
                last.put(span.groupId(), tail.key);
            }
        }
        return last;
    }

    /** The current QUERY_RESULT (PENDING while stagings run, else FINAL). */
    public Reply.QueryResult result() {
        QueryStatus status = state == State.PENDING ? QueryStatus.PENDING : QueryStatus.FINAL;
        if (state == State.PENDING) owed = Owed.QUERY_SETTLED;
        return switch (selected) {
            case QueryPlan.Miss miss -> new Reply.QueryResult(operationId(), revision(), status, false,
                    query.originTokens(), miss.groups());
            case QueryPlan.Hit hit -> new Reply.QueryResult(operationId(), revision(), status, true,
                    hit.boundaryTokens(), hit.groups(scope.contract()));
        };
    }

    // ---- planning --------------------------------------------------------------------------

    private QueryPlan plan(QueryPlanner.Sources sources, long stagingCapBytes) {
        return services.planner().plan(query, scope, excluded, sources, stagingCapBytes);
    }

    private QueryPlan chosen(QueryPlan plan) {
        return plan instanceof QueryPlan.Hit full ? BoundaryChooser.choose(full, query, scope, excluded, services) : plan;
    }

    private void adoptOrMiss(QueryPlan plan) {
        if (adopt(plan).isPresent()) settleMiss(List.of());
    }

    /** Takes {@code plan} as the operation's selection; on refusal holds nothing and says why. */
    private Optional<Reply.Error> adopt(QueryPlan plan) {
        switch (plan) {
            case QueryPlan.Miss miss -> {
                settleMiss(miss.groups());
                return Optional.empty();
            }
            case QueryPlan.Hit h -> {
                if (!services.leases().tryAcquire(h.pageCount())) {
                    h.releaseAll();
                    return Optional.of(new Reply.Error(ErrorCode.BUSY, "lease table full ("
                            + services.leases().used() + " of " + services.leases().capacity() + " leases)"));
                }
                long bytes = h.stagingBytes();
                if (!services.stagingBytes().tryAcquire(bytes)) {
                    h.releaseAll();
                    services.leases().release(h.pageCount());
                    return adoptWithin(bytes);
                }
                leaseTickets = h.pageCount();
                session.leaseTickets(leaseTickets);
                selected = h;
                if (pump.start(h.spans())) peerWait.fetching(h.spans());
                else finishHit();
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
        QueryPlan capped = plan(peerWait.sources(), services.stagingBytes().available());
        if (capped instanceof QueryPlan.Hit h) {
            if (h.stagingBytes() < refusedBytes) return adopt(capped);
            h.releaseAll();
        }
        QueryPlan fallback = plan(QueryPlanner.Sources.DRAM, 0);
        if (fallback instanceof QueryPlan.Miss) {
            // NO_SPACE only when staged pages could have made a hit and DRAM alone cannot
            return Optional.of(new Reply.Error(ErrorCode.NO_SPACE, "staging " + refusedBytes
                    + " bytes from SSD does not fit the staging budget (" + services.stagingBytes() + ")"));
        }
        return adopt(fallback);
    }

    /** A staging landed (its bytes are back, {@link StagingPump#landed}): take its lease, or select again. */
    private void onStaged(PageSlot slot, StageResult result) {
        Lease lease = result instanceof StageResult.Staged(Lease l, StageResult.Source ignored) ? l : null;
        if (slot.state == PageSlot.State.ABANDONED) peerWait.landed(slot);
        if (state != State.PENDING || slot.state != PageSlot.State.STAGING) {
            if (lease != null) lease.release();
            drainCheck();
            return;
        }
        if (lease != null && lease.namespaceId() == scope.namespaceId()) {
            slot.staged(lease, ((StageResult.Staged) result).source());
        } else {
            if (lease != null) lease.release();
            slot.state = PageSlot.State.FAILED;
            excluded.add(slot.key);
        }
        if (pump.busy()) {
            pump.pump();
            return;
        }
        if (((QueryPlan.Hit) selected).anyFailed()) replan();
        else finishHit();
        settledCheck();
    }

    /**
     * A staging failed: select again with the failed keys missing. The old leases are kept until
     * the new plan has taken its own, so pages both need stay pinned in DRAM meanwhile.
     */
    private void replan() {
        QueryPlan old = selected;
        long oldTickets = leaseTickets;
        leaseTickets = 0;
        selected = new QueryPlan.Miss(List.of());
        QueryPlan plan = replans++ < services.bounds().maxReplans() ? plan(peerWait.sources(), Long.MAX_VALUE)
                : new QueryPlan.Miss(List.of());
        services.leases().release(oldTickets);
        session.leaseTickets(-oldTickets);
        adoptOrMiss(plan);
        if (old instanceof QueryPlan.Hit h) h.releaseAll();
    }

    private void finishHit() {
        QueryPlan.Hit hit = (QueryPlan.Hit) selected;
        Validation v = new RecoveryDemand(scope.contract().pageTokens(), query.originTokens(), hit.boundaryTokens(),
                hit.required()).validate(scope.contract(), query.promptTokens());
        if (v instanceof Validation.Rejected(String reason)) {
            // Defence in depth: a demand the contract rejects is never served as a hit.
            UnexpectedErrors.record(UnexpectedErrors.Layer.QUERY, "QueryOperation.finishHit", "a miss",
                    new IllegalStateException("selected demand rejected: " + reason));
            settleMiss(List.of());
            return;
        }
        transition(State.FINAL);
    }

    private void settleMiss(List<Reply.GroupResult> groups) {
        releaseAll();
        selected = new QueryPlan.Miss(groups);
        transition(State.FINAL);
    }

    /** Counts the settled answer, marks a hit's leased keys as needed (retention) and consumes prepared ones. */
    private void countSettled() {
        QueryMetrics.SettledQuery settled = selected.settled(query, Math.max(0, services.clock().getAsLong() - arrivedNanos));
        services.metrics().countSettled(settled);
        if (!settled.hit()) return;
        List<StateKey> firstNeeded = ((QueryPlan.Hit) selected).firstNeeded();
        if (!firstNeeded.isEmpty()) services.store().retention().needed(scope.namespaceId(), firstNeeded);
        // prepared pages this hit leased are consumed: the Manager's own hold on them ends
        for (PrepareOperation owner : services.speculation().consume(scope.namespaceId(), settled.leasedKeys())) {
            owner.consumedCheckLater(services.callbacks());
        }
    }

    private List<QueryPlan.SlotSpan> spans() {
        return selected instanceof QueryPlan.Hit h ? h.spans() : List.of();
    }

    // ---- restore and ending ----------------------------------------------------------------

    /** Checks a RESTORE of this FINAL hit into {@code region} and starts its copies (see {@link Restorer}). */
    public Restoring restore(Request.Restore request, EngineRegion region) {
        if (query.target() != CompletionTarget.ENGINE_RESTORE) {
            return Restoring.refused(new Reply.Error(ErrorCode.INVALID_DEMAND, "operation " + operationId()
                    + " targets HOST_READY"));
        }
        if (state != State.FINAL || !(selected instanceof QueryPlan.Hit hit)) {
            return Restoring.refused(new Reply.Error(ErrorCode.INVALID_DEMAND, "operation " + operationId()
                    + " is not a FINAL hit"));
        }
        return restorer.start(request, region, hit.spans());
    }

    /**
     * CANCEL, RELEASE, replacement by a new revision or disconnect: drops queued stagings at once,
     * stops unstarted copies, releases every lease no submitted I/O still reads; the rest is
     * released when that I/O drains. {@code notifyDrained}: send COMPLETION DRAINED then.
     */
    public Stopped stop(boolean notifyDrained) {
        if (state == State.DRAINING || state == State.ENDED) return new Stopped(0, state == State.ENDED);
        boolean copying = restorer.stop();
        peerWait.stopped();
        pump.stop();
        int released = copying ? 0 : releaseAllLeases();
        transition(State.DRAINING);
        owed = notifyDrained ? Owed.DRAINED : Owed.NOTHING;
        return new Stopped(released, endIfDrained());
    }

    private void drainCheck() {
        if (state != State.DRAINING) return;
        if (endIfDrained() && owed == Owed.DRAINED) {
            owed = Owed.NOTHING;
            session.emit(new Reply.Completion(operationId(), revision(), CompletionEvent.DRAINED, Reply.Settled.OK));
        }
    }

    /** Ends the operation if nothing is in flight; true if it is ENDED now. */
    private boolean endIfDrained() {
        if (pump.inFlight() > 0 || restorer.inFlight() || peerWait.abandonedInFlight() > 0) return false;
        releaseAll();
        transition(State.ENDED);
        session.ended(this);
        return true;
    }

    private int releaseAllLeases() {
        return selected instanceof QueryPlan.Hit h ? h.releaseLeases(services.store()) : 0;
    }

    /** Every lease and every lease table entry back. */
    private void releaseAll() {
        releaseAllLeases();
        services.leases().release(leaseTickets);
        session.leaseTickets(-leaseTickets);
        leaseTickets = 0;
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
