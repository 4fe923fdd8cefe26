package io.orbitkv.core.query;

import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.state.StateKey;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.PriorityQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;

/**
 * The Manager's preparation state, shared by every session: the speculation budget (bytes in
 * flight and bytes held, separate from the QUERY staging budget), the table of prepared pages
 * (one DRAM lease each, held for the Manager, not for an engine), the count of live prepares,
 * the prepares held back by demand reads, and the per-namespace {@link PrepareAccounting}.
 *
 * <p>Thread model: thread-safe. The held table and the waiting queue are guarded by this
 * object's monitor, which is taken under a session's lock (a QUERY consuming, a prepare holding
 * or letting go) and never the other way round: it calls no session and takes no other lock;
 * {@link #resumeWaiting} hands the resumed prepares to the caller, which runs them on callback
 * threads.
 *
 * <p>Invariants: every held page's bytes are counted in {@link #held()} and in its session's held
 * budget until it is let go, exactly once (consumed, released unused or expired); the table has at
 * most one entry per (namespace, key); live prepares {@code <= maxPrepares}.
 *
 * <p>Design note: the held pages live here rather than in their operations so that a QUERY of
 * another connection can consume them without taking that connection's lock (which would order
 * two session locks); the operation keeps only the keys it added and lets go of those still its
 * own when it ends.
 */
public final class Speculation {

    private final SpeculationBounds bounds;
    private final Budget inFlight;
    private final Budget held;
    private final LongSupplier clock;
    private final PrepareAccounting accounting = new PrepareAccounting();
    private final AtomicInteger prepares = new AtomicInteger();
    private final LongAdder busyRefusals = new LongAdder();
    private final Map<HeldKey, HeldPage> table = new HashMap<>();
    private final PriorityQueue<PrepareOperation> waiting = new PriorityQueue<>(PrepareOperation.RESUME_ORDER);

    /** A prepared page's identity: keys are scoped to their namespace. */
    record HeldKey(int namespaceId, StateKey key) {
    }

    /** One prepared page: its lease, bytes, owner (and owner's session budget) and since when. */
    private record HeldPage(PrepareOperation owner, Lease lease, long bytes, Budget sessionHeld, long sinceNanos) {
    }

    /** The per-connection part of the budget. */
    public record SessionBudgets(Budget inFlight, Budget held) {
    }

    public Speculation(SpeculationBounds bounds, LongSupplier clock) {
        this.bounds = Objects.requireNonNull(bounds, "bounds");
        this.clock = Objects.requireNonNull(clock, "clock");
        this.inFlight = new Budget("speculation in flight", "bytes", bounds.inFlightBytes());
        this.held = new Budget("speculation held", "bytes", bounds.heldBytes());
    }

    public SpeculationBounds bounds() {
        return bounds;
    }

    /** Bytes admitted by prepares and not yet landed (Manager-wide). */
    public Budget inFlight() {
        return inFlight;
    }

    /** Bytes prepares hold or will hold once landed (Manager-wide). */
    public Budget held() {
        return held;
    }

    public PrepareAccounting accounting() {
        return accounting;
    }

    /** A new connection's share of the budget. */
    public SessionBudgets sessionBudgets() {
        return new SessionBudgets(new Budget("session speculation in flight", "bytes", bounds.sessionInFlightBytes()),
                new Budget("session speculation held", "bytes", bounds.sessionHeldBytes()));
    }

    /** Live prepare operations. */
    public int prepares() {
        return prepares.get();
    }

    /** Prepares refused because the prepare table was full. */
    public long busyRefusals() {
        return busyRefusals.sum();
    }

    /** Pages held now. */
    public synchronized int heldPages() {
        return table.size();
    }

    boolean tryAdmit() {
        for (;;) {
            int now = prepares.get();
            if (now >= bounds.maxPrepares()) {
                busyRefusals.increment();
                return false;
            }
            if (prepares.compareAndSet(now, now + 1)) return true;
        }
    }

    void ended() {
        prepares.decrementAndGet();
    }

    /**
     * Takes a landed page for {@code owner}: its held bytes (taken at admission) move to the
     * table. A page another prepare already holds is let go at once (its bytes back).
     */
    synchronized void hold(PrepareOperation owner, HeldKey k, Lease lease, long bytes, Budget sessionHeld, boolean peer) {
        if (table.containsKey(k)) {
            lease.release();
            held.release(bytes);
            sessionHeld.release(bytes);
            return;
        }
        table.put(k, new HeldPage(owner, lease, bytes, sessionHeld, clock.getAsLong()));
        accounting.prepared(k.namespaceId(), peer);
    }

    /**
     * A QUERY of namespace {@code namespaceId} leased {@code keys}: the prepared ones among them
     * are consumed (their Manager lease and bytes let go; the QUERY's own lease keeps them in
     * DRAM). Returns the owners that may now hold nothing, for the caller to check later.
     */
    public synchronized List<PrepareOperation> consume(int namespaceId, List<StateKey> keys) {
        if (table.isEmpty()) return List.of();
        List<PrepareOperation> owners = new ArrayList<>();
        for (StateKey key : keys) {
            HeldPage p = table.remove(new HeldKey(namespaceId, key));
            if (p == null) continue;
            let(namespaceId, p, PrepareAccounting.Release.CONSUMED);
            if (!owners.contains(p.owner())) owners.add(p.owner());
        }
        return owners;
    }

    /** Lets go of {@code owner}'s pages among {@code keys} (cancel, close or expiry); returns how many. */
    synchronized int releaseOwned(PrepareOperation owner, List<HeldKey> keys, PrepareAccounting.Release why) {
        int n = 0;
        for (HeldKey k : keys) {
            HeldPage p = table.get(k);
            if (p == null || p.owner() != owner) continue;
            table.remove(k);
            let(k.namespaceId(), p, why);
            n++;
        }
        return n;
    }

    /** Whether {@code owner} still holds any of {@code keys}. */
    synchronized boolean holdsAny(PrepareOperation owner, List<HeldKey> keys) {
        for (HeldKey k : keys) {
            HeldPage p = table.get(k);
            if (p != null && p.owner() == owner) return true;
        }
        return false;
    }

    private void let(int namespaceId, HeldPage p, PrepareAccounting.Release why) {
        p.lease().release();
        held.release(p.bytes());
        p.sessionHeld().release(p.bytes());
        accounting.released(namespaceId, why, p.bytes(), clock.getAsLong() - p.sinceNanos());
    }

    /** {@code op} has queued reads held back by demand reads: resumed by {@link #resumeWaiting}. */
    synchronized void await(PrepareOperation op) {
        if (!waiting.contains(op)) waiting.add(op);
    }

    /**
     * Once no QUERY staging is in flight ({@code demandIdle}): the waiting prepares, highest
     * priority first, for the caller to resume each under its session's lock. Called by the tick.
     */
    public synchronized List<PrepareOperation> resumeWaiting(boolean demandIdle) {
        if (!demandIdle || waiting.isEmpty()) return List.of();
        List<PrepareOperation> out = new ArrayList<>(waiting.size());
        while (!waiting.isEmpty()) out.add(waiting.poll());
        return out;
    }
}
