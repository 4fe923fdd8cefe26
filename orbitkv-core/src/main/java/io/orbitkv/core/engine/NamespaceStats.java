package io.orbitkv.core.engine;

import io.orbitkv.core.query.QueryMetrics;
import io.orbitkv.core.query.QueryServices;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * One namespace's share of the Manager's tables and counters, as its own engines see them in a
 * STATS reply (protocol §6.8): its registered connections, their operations, lease-table entries,
 * reservations and regions, and what its queries, restores and refusals counted. Also the
 * {@link QueryMetrics} its operations count into: every call is counted here and forwarded to the
 * Manager-wide meters, so {@code /metrics} and {@code /status} stay the sum over namespaces.
 *
 * <p>Thread model: thread-safe; the table sizes are atomics that sessions adjust under their own
 * locks (as they adjust {@link ManagerMetrics}' totals), the running counts are adders.
 *
 * <p>Invariants: each table size equals the sum over the namespace's open and draining sessions
 * of what they hold; one instance per namespace id for the Manager's life
 * ({@link ManagerCore#namespaceStats}), so the instances are bounded by the namespace table's
 * {@code maxNamespaces}.
 *
 * <p>Design note: a STATS reply that reported Manager-wide figures let one tenant watch another's
 * traffic (its DRAM bytes moved when another namespace published). Counting per namespace at the
 * points that already count Manager-wide costs one more atomic add there and nothing at STATS;
 * summing over sessions at STATS would have had to take every other session's lock.
 */
final class NamespaceStats implements QueryMetrics {

    /** The DRAM id of the namespace (its arenas, its hint pins). */
    final int namespaceId;
    final AtomicLong connections = new AtomicLong();
    final AtomicLong operations = new AtomicLong();
    final AtomicLong prepares = new AtomicLong();
    final AtomicLong leases = new AtomicLong();
    final AtomicLong reservations = new AtomicLong();
    final AtomicLong regions = new AtomicLong();
    final LongAdder busy = new LongAdder();
    private final LongAdder hits = new LongAdder();
    private final LongAdder misses = new LongAdder();
    private final LongAdder pending = new LongAdder();
    private final LongAdder pagesLeased = new LongAdder();
    private final LongAdder restoreBytes = new LongAdder();
    private final QueryMetrics manager;
    private final QueryServices services;

    /**
     * @param namespaceId the namespace's DRAM id
     * @param shared      the Manager's services; this namespace's operations get a copy counting here and in its meters
     */
    NamespaceStats(int namespaceId, QueryServices shared) {
        this.namespaceId = namespaceId;
        this.manager = shared.metrics();
        this.services = new QueryServices(shared.store(), shared.planner(), shared.leases(), shared.stagingBytes(),
                shared.copier(), shared.callbacks(), shared.timer(), shared.clock(), shared.bounds(), this,
                shared.speculation());
    }

    /** What the namespace's QUERY and PREPARE operations borrow. */
    QueryServices services() {
        return services;
    }

    @Override
    public void countPending() {
        pending.increment();
        manager.countPending();
    }

    @Override
    public void countSettled(SettledQuery settled) {
        (settled.hit() ? hits : misses).increment();
        pagesLeased.add(settled.pages().total());
        manager.countSettled(settled);
    }

    @Override
    public void countRestore(RestoreOutcome outcome, TierCounts bytesCopied, long durationNanos) {
        restoreBytes.add(bytesCopied.total());
        manager.countRestore(outcome, bytesCopied, durationNanos);
    }

    @Override
    public void countPeerWait(PeerWaitOutcome outcome) {
        manager.countPeerWait(outcome);
    }

    @Override
    public void timePeerWaitPhase(QueryMetrics.PeerWaitPhase phase, long durationNanos) {
        manager.timePeerWaitPhase(phase, durationNanos);
    }

    long queries(QueryOutcome outcome) {
        return switch (outcome) {
            case HIT -> hits.sum();
            case MISS -> misses.sum();
            case PENDING -> pending.sum();
        };
    }

    long pagesLeased() {
        return pagesLeased.sum();
    }

    long restoreBytes() {
        return restoreBytes.sum();
    }
}
