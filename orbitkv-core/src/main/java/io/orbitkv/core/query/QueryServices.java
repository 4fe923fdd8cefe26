package io.orbitkv.core.query;

import io.orbitkv.core.storage.TieredStore;
import io.orbitkv.core.transfer.RestoreCopier;

import java.util.Objects;
import java.util.concurrent.Executor;
import java.util.function.LongSupplier;

/**
 * What every {@link QueryOperation} of a Manager borrows: the tiers, the planner, the two
 * budgets, the restore copier, the threads completions and timers run on, the clock, the bounds
 * and the metrics sink. Built once by the Manager; the session adds only its
 * {@link SessionCallback}.
 *
 * <p>Immutable and thread-safe as a record; each component has its own owner and thread model
 * (the budgets are lock-free, the copier is bounded, the clock is monotonic).
 *
 * @param store        the tiers pages are looked up, staged and released in
 * @param planner      turns a QUERY into a plan (the same store, plus the peer routes)
 * @param leases       the global lease table (unit: leases)
 * @param stagingBytes bytes being staged from SSD or peers into DRAM (unit: bytes)
 * @param copier       the bounded executor of restore copies
 * @param callbacks    runs I/O completions (stagings, copies, timers) off the I/O threads, which
 *                     must not take session locks
 * @param timer        runs a task once after a delay, handing it to {@code callbacks}
 * @param clock        the Manager's monotonic clock (nanoseconds): latencies, restore samples
 * @param bounds       the per-operation bounds
 * @param metrics      where operations count what they did
 * @param speculation  the prepared pages and the speculation budget (PREPARE); a QUERY consumes them
 */
public record QueryServices(TieredStore store, QueryPlanner planner, Budget leases, Budget stagingBytes,
                            RestoreCopier copier, Executor callbacks, Timer timer, LongSupplier clock, Bounds bounds,
                            QueryMetrics metrics, Speculation speculation) {

    public QueryServices {
        Objects.requireNonNull(store, "store");
        Objects.requireNonNull(planner, "planner");
        Objects.requireNonNull(leases, "leases");
        Objects.requireNonNull(stagingBytes, "stagingBytes");
        Objects.requireNonNull(copier, "copier");
        Objects.requireNonNull(callbacks, "callbacks");
        Objects.requireNonNull(timer, "timer");
        Objects.requireNonNull(clock, "clock");
        Objects.requireNonNull(bounds, "bounds");
        Objects.requireNonNull(metrics, "metrics");
        Objects.requireNonNull(speculation, "speculation");
    }

    /** Runs tasks once after a delay. */
    @FunctionalInterface
    public interface Timer {
        /**
         * Runs {@code task} once after {@code delayNanos} on a timer thread, which hands it to the
         * callback threads before it takes any lock; returns what cancels it (idempotent).
         */
        Runnable schedule(Runnable task, long delayNanos);
    }

    /**
     * The bounds of one operation.
     *
     * @param restoreInlineBytes a RESTORE of at most this many bytes is copied on the thread that
     *                           handles it, not by the copier
     * @param stagesPerOperation stagings one operation submits at once (and peer pages per batch)
     * @param maxReplans         re-selections after staging failures before it settles as a miss
     * @param peerWaitMaxNanos   the longest a QUERY waits for peers, whatever it asks (0 never waits)
     */
    public record Bounds(long restoreInlineBytes, int stagesPerOperation, int maxReplans, long peerWaitMaxNanos) {
        public Bounds {
            if (restoreInlineBytes < 0 || stagesPerOperation < 1 || maxReplans < 0 || peerWaitMaxNanos < 0) {
                throw new IllegalArgumentException("restoreInlineBytes " + restoreInlineBytes + ", stagesPerOperation "
                        + stagesPerOperation + ", maxReplans " + maxReplans + ", peerWaitMaxNanos " + peerWaitMaxNanos);
            }
        }
    }
}
