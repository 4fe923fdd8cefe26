package io.orbitkv.core.query;

import io.orbitkv.core.log.UnexpectedErrors;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.protocol.Request;

import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The peer wait of one QUERY revision (first-query peer hits, docs/manager-core.md): the catalog
 * lookup of the pages no local tier holds, the timer at the wait bound, and the peer fetches given
 * up at that bound that have not landed yet. The bound holds for every peer fetch of a QUERY that
 * may wait, whether the lookup of this QUERY or an earlier one's named the peer.
 *
 * <p>Thread model: confined to the session lock, like its {@link QueryOperation}; the catalog's
 * answer and the timer hop to {@link QueryServices#callbacks()} and take the lock before they call
 * the operation back.
 *
 * <p>States, all transitions in {@link #transition}: NONE (the QUERY does not wait) →
 * DISCOVERING (the lookup is in flight, nothing is held for it) → WAITING (the lookup answered;
 * peer fetches may be in flight) → EXPIRED (the bound passed first: plans use local tiers only)
 * or ENDED (settled or stopped before the bound). DISCOVERING may also go straight to EXPIRED or
 * ENDED; NONE goes straight to WAITING when a plan fetches pages the catalog's cache already named. Each wait that started is counted exactly once, when it leaves DISCOVERING or WAITING;
 * its phases are timed ({@link QueryMetrics.PeerWaitPhase}): the discovery when the catalog
 * answers, the fetch when a WAITING wait settles.
 *
 * <p>Invariant: {@code abandonedInFlight} counts the {@link PageSlot.State#ABANDONED} pages of the
 * operation; the operation drains only when it is zero.
 *
 * <p>Design note: one catalog lookup of up to {@value #MAX_DISCOVERED_KEYS} keys per QUERY, not one
 * per page, and the wait holds nothing while it asks: a 4,096-page prefix that only peers hold is
 * found in one round trip, and a CANCEL during the lookup drains at once. The timer is armed for
 * cached candidates too: a frozen peer otherwise held such a QUERY until the transport's own 10 s
 * fetch deadline, whatever its 2 s or 5 s bound said.
 */
final class PeerWait {

    /**
     * Keys one QUERY asks the catalog about at once when it waits for peers (32 bytes each on the
     * wire; a 65,536-page query asks for its first 4,096 missing pages).
     */
    static final int MAX_DISCOVERED_KEYS = 4_096;

    /** The wait's life; see the class comment. */
    enum State { NONE, DISCOVERING, WAITING, EXPIRED, ENDED }

    private final QueryServices services;
    private final SessionCallback session;
    private final Request.Query query;
    private final SessionScope scope;
    /** When the QUERY arrived: the bound counts from here. */
    private final long arrivedNanos;
    private final Runnable onDiscovered;
    private final Runnable onExpired;
    private State state = State.NONE;
    private Runnable cancelTimer = () -> { };
    private int abandonedInFlight;
    /** When the fetch phase began: the catalog's answer, or the arrival when no lookup ran. */
    private long fetchFromNanos;

    /**
     * @param onDiscovered called under the session lock when the catalog answered (or its deadline passed)
     * @param onExpired    called under the session lock when the wait bound passed
     */
    PeerWait(QueryServices services, SessionCallback session, Request.Query query, SessionScope scope,
             long arrivedNanos, Runnable onDiscovered, Runnable onExpired) {
        this.services = services;
        this.session = session;
        this.query = query;
        this.scope = scope;
        this.arrivedNanos = arrivedNanos;
        this.onDiscovered = onDiscovered;
        this.onExpired = onExpired;
    }

    /**
     * When the QUERY may wait ({@code peer_wait_millis} > 0, capped by the Manager's maximum) and
     * pages beyond {@code plan}'s boundary are held by no local tier: lets {@code plan} go, asks
     * the catalog where all of those pages are (one batch), arms the timer and answers true (the
     * operation is PENDING, holding nothing). Without a wait, the lookup still runs in the
     * background so that the next QUERY finds every peer page, not one more page per QUERY.
     */
    boolean start(QueryPlan plan) {
        long waitNanos = waitNanos();
        RemotePages remote = services.planner().remote();
        if (!remote.discoverable()) return false;
        List<StateKey> missing = services.planner().missingLocally(query, scope, plan, MAX_DISCOVERED_KEYS);
        if (missing.isEmpty()) return false;
        if (waitNanos <= 0) {
            remote.discover(missing, scope);
            return false;
        }
        if (plan instanceof QueryPlan.Hit h) h.releaseAll();
        transition(State.DISCOVERING);
        armTimer(waitNanos);
        remote.discover(missing, scope).whenCompleteAsync((ignored, failure) -> {
            if (failure != null) {
                UnexpectedErrors.record(UnexpectedErrors.Layer.QUERY, "PeerWait.discover", "a plan from what is known",
                        failure);
            }
            synchronized (session.lock()) {
                onDiscovered.run();
            }
        }, services.callbacks());
        return true;
    }

    /**
     * The operation adopted a plan whose peer pages (of {@code spans}) the catalog's cache already
     * named, so no lookup ran: when the QUERY may wait and the wait is still NONE, moves to WAITING
     * and arms the timer at the bound counted from the QUERY's arrival, so that those fetches are
     * abandoned there as after a lookup (no change otherwise).
     */
    void fetching(List<QueryPlan.SlotSpan> spans) {
        long waitNanos = waitNanos();
        if (state != State.NONE || waitNanos <= 0 || !anyPeerPageToLand(spans)) return;
        transition(State.WAITING);
        fetchFromNanos = arrivedNanos;
        armTimer(Math.max(0, arrivedNanos + waitNanos - services.clock().getAsLong()));
    }

    private static boolean anyPeerPageToLand(List<QueryPlan.SlotSpan> spans) {
        for (QueryPlan.SlotSpan s : spans) {
            for (PageSlot p : s.pages()) {
                if (p.remote && (p.state == PageSlot.State.QUEUED || p.state == PageSlot.State.STAGING)) return true;
            }
        }
        return false;
    }

    /** The QUERY's peer wait bound: {@code peer_wait_millis} capped by the Manager's maximum. */
    private long waitNanos() {
        return Math.min(TimeUnit.MILLISECONDS.toNanos(query.peerWaitMillis()), services.bounds().peerWaitMaxNanos());
    }

    private void armTimer(long delayNanos) {
        cancelTimer = services.timer().schedule(() -> {
            synchronized (session.lock()) {
                onExpired.run();
            }
        }, delayNanos);
    }

    /** The catalog answered: true (now WAITING) if the wait was still DISCOVERING, false if it had moved on. */
    boolean discovered() {
        if (state != State.DISCOVERING) return false;
        transition(State.WAITING);
        fetchFromNanos = services.clock().getAsLong();
        services.metrics().timePeerWaitPhase(QueryMetrics.PeerWaitPhase.DISCOVERY, fetchFromNanos - arrivedNanos);
        return true;
    }

    /** The sources a plan may use now: local ones only once the bound passed. */
    QueryPlanner.Sources sources() {
        return state == State.EXPIRED ? QueryPlanner.Sources.LOCAL : QueryPlanner.Sources.ALL;
    }

    /**
     * The bound passed: from DISCOVERING or WAITING, counts the wait EXPIRED and moves to EXPIRED.
     * Returns the state it was in, so the caller knows what was still running (no change from any
     * other state).
     */
    State expire() {
        State was = state;
        switch (was) {
            case DISCOVERING, WAITING -> {
                transition(State.EXPIRED);
                services.metrics().countPeerWait(QueryMetrics.PeerWaitOutcome.EXPIRED);
            }
            case NONE, EXPIRED, ENDED -> { }
        }
        return was;
    }

    /**
     * Gives up the peer pages of {@code spans} that have not landed: a queued one is dropped from
     * {@code pump} (its bytes back at once), a fetch in flight is ABANDONED (its result is released
     * when it lands, so a batch is never left half adopted). True if any page was given up.
     */
    boolean abandonFetches(List<QueryPlan.SlotSpan> spans, StagingPump pump) {
        boolean any = false;
        for (QueryPlan.SlotSpan s : spans) {
            for (PageSlot p : s.pages()) {
                if (!p.remote) continue;
                switch (p.state) {
                    case QUEUED -> {
                        pump.drop(p);
                        any = true;
                    }
                    case STAGING -> {
                        pump.abandon(p);
                        abandonedInFlight++;
                        any = true;
                    }
                    case RESIDENT, FAILED, ABANDONED, READY -> { }
                }
            }
        }
        return any;
    }

    /** An ABANDONED page's fetch landed (its bytes are back): the page is FAILED now. */
    void landed(PageSlot slot) {
        slot.state = PageSlot.State.FAILED;
        abandonedInFlight--;
    }

    /** Fetches given up at the bound that have not landed yet. */
    int abandonedInFlight() {
        return abandonedInFlight;
    }

    /** The operation settled: stops the timer and counts a wait still open as SETTLED. */
    void settled() {
        end(QueryMetrics.PeerWaitOutcome.SETTLED);
    }

    /** The operation was cancelled, released or replaced: stops the timer and counts a wait still open as STOPPED. */
    void stopped() {
        end(QueryMetrics.PeerWaitOutcome.STOPPED);
    }

    private void end(QueryMetrics.PeerWaitOutcome outcome) {
        cancelTimer.run();
        switch (state) {
            case DISCOVERING, WAITING -> {
                if (state == State.WAITING && outcome == QueryMetrics.PeerWaitOutcome.SETTLED) {
                    services.metrics().timePeerWaitPhase(QueryMetrics.PeerWaitPhase.FETCH,
                            services.clock().getAsLong() - fetchFromNanos);
                }
                transition(State.ENDED);
                services.metrics().countPeerWait(outcome);
            }
            case NONE, EXPIRED, ENDED -> { }
        }
    }

    private void transition(State next) {
        boolean legal = switch (state) {
            case NONE -> next == State.DISCOVERING || next == State.WAITING;
            case DISCOVERING -> next == State.WAITING || next == State.EXPIRED || next == State.ENDED;
            case WAITING -> next == State.EXPIRED || next == State.ENDED;
            case EXPIRED, ENDED -> false;
        };
        if (!legal) throw new IllegalStateException("peer wait of operation " + query.operationId() + ": " + state + " -> " + next);
        state = next;
    }
}
