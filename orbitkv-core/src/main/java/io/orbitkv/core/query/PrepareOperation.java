package io.orbitkv.core.query;

import io.orbitkv.core.cost.Estimate;
import io.orbitkv.core.cost.Lookup;
import io.orbitkv.core.storage.StageResult;
import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * One PREPARE of a session (protocol §5.11): the pages of the demand's legal boundary that are not
 * in DRAM, staged into DRAM from SSD or peers ahead of the QUERY that will use them, and held for
 * the Manager (no engine lease, nothing in the lease table) in {@link Speculation}'s table until a
 * QUERY consumes them, the operation is cancelled, it expires, or its connection closes.
 *
 * <p>Thread model: confined to the owning session's lock, like a {@link QueryOperation}; its
 * stagings, timers and resumptions re-enter through the callback threads and take that lock.
 *
 * <p>States: WAITING (admitted; the first read waits for its deadline-driven start) → STAGING
 * (reads queued or in flight) → HOLDING (every read landed) → DRAINING (stopped while reads are in
 * flight) → ENDED. WAITING, STAGING or HOLDING go straight to ENDED when nothing is in flight.
 *
 * <p>Invariants: at admission a page's padded bytes are taken from all four budgets (Manager and
 * session, in flight and held) or from none; the in-flight bytes come back when its read lands or
 * its queue entry is dropped; the held bytes when the page is let go (consumed, released unused,
 * expired) or its read fails; a read in flight when the operation stops still lands before its
 * bytes return (cancellation drains). No page of a prepare is ever reported to the client.
 *
 * <p>Design note: the plan, pump and budgets are the QUERY's, with the staging budget swapped for
 * the speculation budget (a {@link QueryServices} copy) and a gate on the pump: while any QUERY
 * staging is in flight ({@code stagingBytes > 0}) a prepare submits no new read, so demand waits
 * at most for the prepare reads already submitted ({@code stagesPerPrepare} per prepare, all of
 * them within the in-flight budget). The prepare resumes on the next tick after demand went idle.
 */
public final class PrepareOperation {

    /** The operation's life; see the class comment. */
    public enum State { WAITING, STAGING, HOLDING, DRAINING, ENDED }

    /** The order in which held-back prepares resume: higher priority, then earlier first use. */
    static final Comparator<PrepareOperation> RESUME_ORDER = Comparator
            .comparingInt((PrepareOperation o) -> -o.prepare.priority()).thenComparingLong(o -> o.firstUseNanos);

    private static final Runnable NOTHING = () -> { };

    private final QueryServices services;
    private final QueryServices staging;
    private final Speculation speculation;
    private final Speculation.SessionBudgets sessionBudgets;
    private final SessionCallback session;
    private final Consumer<PrepareOperation> onEnded;
    private final Request.Prepare prepare;
    private final SessionScope scope;
    private final long firstUseNanos;
    /** Pages admitted whose read has not landed, with the bytes each took from every budget. */
    private final Map<PageSlot, Long> unlanded = new IdentityHashMap<>();
    /** Keys this operation handed to the held table (some may have been consumed since). */
    private final List<Speculation.HeldKey> heldKeys = new ArrayList<>();
    private final StagingPump pump;
    private QueryPlan.Hit plan;
    private State state = State.WAITING;
    private Runnable cancelStart = NOTHING;
    private Runnable cancelExpiry = NOTHING;
    private boolean notifyDrained;

    /**
     * @param onEnded told (under the lock) once the operation holds nothing and is gone
     */
    public PrepareOperation(QueryServices services, Speculation.SessionBudgets sessionBudgets, SessionCallback session,
                            Request.Prepare prepare, SessionScope scope, Consumer<PrepareOperation> onEnded) {
        this.services = Objects.requireNonNull(services, "services");
        this.speculation = services.speculation();
        this.sessionBudgets = Objects.requireNonNull(sessionBudgets, "sessionBudgets");
        this.session = Objects.requireNonNull(session, "session");
        this.prepare = Objects.requireNonNull(prepare, "prepare");
        this.scope = Objects.requireNonNull(scope, "scope");
        this.onEnded = Objects.requireNonNull(onEnded, "onEnded");
        SpeculationBounds b = speculation.bounds();
        QueryServices.Bounds qb = services.bounds();
        this.staging = new QueryServices(services.store(), services.planner(), services.leases(), speculation.inFlight(),
                services.copier(), services.callbacks(), services.timer(), services.clock(),
                new QueryServices.Bounds(qb.restoreInlineBytes(), b.stagesPerPrepare(), qb.maxReplans(), qb.peerWaitMaxNanos()),
                services.metrics(), speculation);
        this.firstUseNanos = services.clock().getAsLong()
                + Math.min(TimeUnit.MILLISECONDS.toNanos(prepare.firstUseMillis()), b.maxLeadNanos());
        this.pump = new StagingPump(staging, session, scope, this::onStaged, this::demandIdle);
    }

    /**
     * Asks the catalog where the demand's pages beyond its local boundary are (the pages no local
     * tier holds, at most {@value PeerWait#MAX_DISCOVERED_KEYS}), so that a prepare planned once
     * the returned future completes stages the peer pages too: a prepare that arrives with the
     * candidate cache cold (a router's, over the cluster plane) would otherwise see none. Completes
     * at once without peers or with nothing missing; never completes exceptionally (the lookup's
     * own deadline bounds it). Holds nothing when it returns.
     */
    public static CompletableFuture<Void> discover(QueryServices services, Request.Prepare prepare, SessionScope scope) {
        RemotePages remote = services.planner().remote();
        if (!remote.discoverable()) return CompletableFuture.completedFuture(null);
        Request.Query q = prepare.asQuery();
        QueryPlan plan = services.planner().plan(q, scope, Set.of(), QueryPlanner.Sources.LOCAL, Long.MAX_VALUE);
        List<StateKey> missing = services.planner().missingLocally(q, scope, plan, PeerWait.MAX_DISCOVERED_KEYS);
        if (plan instanceof QueryPlan.Hit h) h.releaseAll();
        if (missing.isEmpty()) return CompletableFuture.completedFuture(null);
        return remote.discover(missing, scope);
    }

    public long operationId() {
        return prepare.operationId();
    }

    public State state() {
        return state;
    }

    /**
     * Plans the demand, takes the speculation budget for the pages to stage (trimmed to the
     * longest legal boundary that fits, else refused), arms the start and expiry timers; returns
     * the PREPARED answer. The operation is ENDED unless the answer stages pages.
     */
    public Reply.Prepared start() {
        PrepareAccounting accounting = speculation.accounting();
        if (!speculation.tryAdmit()) return refused();
        Request.Query q = prepare.asQuery();
        QueryPlan chosen = services.planner().plan(q, scope, Set.of(), QueryPlanner.Sources.ALL, Long.MAX_VALUE);
        Reply.PrepareOutcome outcome = Reply.PrepareOutcome.ACCEPTED;
        long cap = Math.min(Math.min(speculation.inFlight().available(), speculation.held().available()),
                Math.min(sessionBudgets.inFlight().available(), sessionBudgets.held().available()));
        if (chosen instanceof QueryPlan.Hit h && h.stagingBytes() > cap) {
            h.releaseAll();
            chosen = services.planner().plan(q, scope, Set.of(), QueryPlanner.Sources.ALL, cap);
            outcome = Reply.PrepareOutcome.TRIMMED;
        }
        if (!(chosen instanceof QueryPlan.Hit h)) return endAtOnce(outcome, 0);
        int resident = 0;
        int toStage = 0;
        for (QueryPlan.SlotSpan s : h.spans()) {
            for (PageSlot p : s.pages()) {
                if (p.state == PageSlot.State.RESIDENT) {
                    p.releaseLease(); // counted, not held: only staged pages are the prepare's
                    resident++;
                } else {
                    toStage++;
                }
            }
        }
        long bytes = h.stagingBytes();
        if (toStage == 0) return endAtOnce(outcome, resident);
        if (!acquireAll(bytes)) {
            h.releaseAll();
            speculation.ended();
            return refused();
        }
        plan = h;
        for (QueryPlan.SlotSpan s : h.spans()) {
            for (PageSlot p : s.pages()) if (p.state == PageSlot.State.QUEUED) unlanded.put(p, p.stagingBytes);
        }
        if (outcome == Reply.PrepareOutcome.TRIMMED) accounting.trimmed(scope.namespaceId());
        long now = services.clock().getAsLong();
        long delay = Math.max(0, firstUseNanos - stagingEstimateNanos(h, bytes) - speculation.bounds().marginNanos() - now);
        cancelExpiry = services.timer().schedule(locked(() -> stop(false, PrepareAccounting.Release.EXPIRED)),
                firstUseNanos - now + speculation.bounds().graceNanos());
        if (delay > 0) cancelStart = services.timer().schedule(locked(this::beginStaging), delay);
        else beginStaging();
        return new Reply.Prepared(operationId(), outcome, toStage, resident,
                (int) Math.min(Integer.MAX_VALUE, TimeUnit.NANOSECONDS.toMillis(delay)), bytes);
    }

    private Reply.Prepared refused() {
        speculation.accounting().refused(scope.namespaceId());
        state = State.ENDED;
        return new Reply.Prepared(operationId(), Reply.PrepareOutcome.REFUSED, 0, 0, 0, 0);
    }

    private Reply.Prepared endAtOnce(Reply.PrepareOutcome outcome, int resident) {
        speculation.ended();
        if (outcome == Reply.PrepareOutcome.TRIMMED) return refused();
        state = State.ENDED;
        return new Reply.Prepared(operationId(), outcome, 0, resident, 0, 0);
    }

    /** Takes {@code bytes} from the four budgets, all or none. */
    private boolean acquireAll(long bytes) {
        Budget[] budgets = {speculation.inFlight(), speculation.held(), sessionBudgets.inFlight(), sessionBudgets.held()};
        for (int i = 0; i < budgets.length; i++) {
            if (!budgets[i].tryAcquire(bytes)) {
                for (int j = 0; j < i; j++) budgets[j].release(bytes);
                return false;
            }
        }
        return true;
    }

    /**
     * How long staging {@code bytes} is expected to take: the SSD read model of the boundary
     * chooser (waves of {@code stagesPerPrepare} reads, mean plus error) when warm, else the bytes
     * at the cold rate (peer pages included).
     */
    private long stagingEstimateNanos(QueryPlan.Hit h, long bytes) {
        if (BoundaryChooser.stateReady(h, scope, staging) instanceof Lookup.Warm(Estimate e)) {
            return (long) Math.min(Long.MAX_VALUE / 4, e.meanNanos() + e.errorNanos());
        }
        return (long) Math.min(Long.MAX_VALUE / 4, bytes * 1e9 / speculation.bounds().coldBytesPerSecond());
    }

    private Runnable locked(Runnable task) {
        return () -> {
            synchronized (session.lock()) {
                task.run();
            }
        };
    }

    private boolean demandIdle() {
        return services.stagingBytes().used() == 0;
    }

    private void beginStaging() {
        if (state != State.WAITING) return;
        state = State.STAGING;
        pump.start(plan.spans());
        waitForDemandCheck();
    }

    /** Pages still queued behind demand reads: ask to be resumed (see {@link Speculation#resumeWaiting}). */
    private void waitForDemandCheck() {
        if (state == State.STAGING && pump.queued() > 0 && !demandIdle()) speculation.await(this);
    }

    /** Demand went idle: {@link #resume} under the session's lock (from a callback thread). */
    public void resumeLocked() {
        synchronized (session.lock()) {
            resume();
        }
    }

    /** Demand went idle: submit what the window allows. Under the lock. */
    void resume() {
        if (state != State.STAGING) return;
        pump.pump();
        waitForDemandCheck();
    }

    private void onStaged(PageSlot slot, StageResult result) {
        long bytes = unlanded.remove(slot);
        sessionBudgets.inFlight().release(bytes);
        Lease lease = result instanceof StageResult.Staged(Lease l, StageResult.Source ignored) ? l : null;
        if (state == State.STAGING && lease != null && lease.namespaceId() == scope.namespaceId()) {
            Speculation.HeldKey k = new Speculation.HeldKey(scope.namespaceId(), slot.key);
            heldKeys.add(k);
            speculation.hold(this, k, lease, bytes, sessionBudgets.held(),
                    ((StageResult.Staged) result).source() == StageResult.Source.PEER_READ);
        } else {
            if (lease != null) lease.release();
            speculation.held().release(bytes);
            sessionBudgets.held().release(bytes);
        }
        switch (state) {
            case STAGING -> {
                if (pump.busy()) {
                    pump.pump();
                    waitForDemandCheck();
                } else {
                    state = State.HOLDING;
                    consumedCheck();
                }
            }
            case DRAINING -> drainCheck();
            case WAITING, HOLDING, ENDED -> { }
        }
    }

    /** Ends a HOLDING operation whose pages were all consumed (or all failed). Under the lock. */
    void consumedCheck() {
        if (state == State.HOLDING && !speculation.holdsAny(this, heldKeys)) stop(false, PrepareAccounting.Release.CONSUMED);
    }

    /** Schedules {@link #consumedCheck} on a callback thread (a QUERY of any session consumed pages of this). */
    void consumedCheckLater(Executor callbacks) {
        callbacks.execute(locked(this::consumedCheck));
    }

    /**
     * CANCEL, RELEASE, expiry or disconnect ({@code why}: UNUSED or EXPIRED): drops queued reads,
     * lets go of every held page, and gives back the bytes of pages never submitted; reads in
     * flight drain first. {@code notify}: COMPLETION DRAINED (revision 0) once they have.
     */
    public QueryOperation.Stopped stop(boolean notify, PrepareAccounting.Release why) {
        if (state == State.DRAINING || state == State.ENDED) return new QueryOperation.Stopped(0, state == State.ENDED);
        cancelStart.run();
        cancelExpiry.run();
        pump.stop();
        for (Iterator<Map.Entry<PageSlot, Long>> it = unlanded.entrySet().iterator(); it.hasNext(); ) {
            Map.Entry<PageSlot, Long> e = it.next();
            PageSlot slot = e.getKey();
            if (slot.state == PageSlot.State.STAGING) continue; // submitted: its bytes come back when it lands
            speculation.inFlight().release(slot.stagingBytes); // never submitted (a dropped page's are back already)
            slot.stagingBytes = 0;
            long bytes = e.getValue();
            sessionBudgets.inFlight().release(bytes);
            speculation.held().release(bytes);
            sessionBudgets.held().release(bytes);
            it.remove();
        }
        int released = speculation.releaseOwned(this, heldKeys, why);
        state = State.DRAINING;
        notifyDrained = notify;
        return new QueryOperation.Stopped(released, endIfDrained());
    }

    private void drainCheck() {
        if (state == State.DRAINING && endIfDrained() && notifyDrained) {
            notifyDrained = false;
            session.emit(new Reply.Completion(operationId(), 0, CompletionEvent.DRAINED, Reply.Settled.OK));
        }
    }

    private boolean endIfDrained() {
        if (pump.inFlight() > 0) return false;
        state = State.ENDED;
        speculation.ended();
        onEnded.accept(this);
        return true;
    }
}
