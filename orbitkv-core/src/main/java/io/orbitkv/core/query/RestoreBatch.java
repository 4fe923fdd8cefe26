package io.orbitkv.core.query;

import io.orbitkv.core.log.UnexpectedErrors;
import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.core.transfer.EngineRegion;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;
import java.util.function.IntSupplier;
import java.util.function.Predicate;

/**
 * The copies of one accepted RESTORE: leased source pages, their destination pages in the
 * engine's region, copied on the connection's thread ({@link #copyAll}), on it and one idle copy
 * thread taking pages from one counter ({@link #copyShared}), or as copier tasks of contiguous
 * pages ({@link #shares}); the batch's {@link Copied} goes to {@code onCopied} exactly once, from
 * the calling thread for the first two and from the share that ends last for the third.
 *
 * <p>Thread model: built under the session lock; copies run without it, on any threads, and read
 * only final fields, the leases (held by the operation until {@code onCopied} ran) and
 * {@code stopped}. The running totals of shares are guarded by this object's monitor, taken once
 * per share; a shared copy's helper hands its totals over through its state (volatile).
 *
 * <p>Invariant: {@code onCopied} runs once, after every copy of the batch ended (copied, stopped
 * or failed), with the sum of their bytes: no thread touches the region after the report.
 *
 * <p>Design note: one report per batch, not one per share: a RESTORE split into 4 shares used to
 * hop to a callback thread and take the session lock 4 times; now the last share alone does
 * (docs/performance.md, Manager, "three hand-offs per restore"). A shared copy's caller waits for
 * its helper rather than letting the helper report, so an inline restore still reports on the
 * connection's thread, under no lock a copy thread could wait on.
 */
final class RestoreBatch {

    /** What a batch did: bytes copied (by source tier), and whether a copy failed or the region faulted. */
    record Copied(long bytes, QueryMetrics.TierCounts byTier, boolean failed, boolean regionFault) {
    }

    /** Region faults repeat per restore of a broken region: one WARN line per 10 s with a count. */
    private static final io.orbitkv.core.log.RateLimitedLog RESTORE_FAULTS =
            io.orbitkv.core.log.RateLimitedLog.tenSeconds(QueryOperation.class.getName());

    private final Lease[] leases;
    private final QueryMetrics.Tier[] tiers;
    private final MemorySegment[] targets;
    private final EngineRegion region;
    private final BooleanSupplier stopped;
    private final Consumer<Copied> onCopied;
    /** Guarded by this: shares not yet ended, and the totals of those that did. */
    private int sharesLeft;
    private final Tally total = new Tally();

    /**
     * @param sources  the leased pages, in the RESTORE's order
     * @param targets  their destination slices of {@code region}, in the same order
     * @param stopped  true once the operation stopped: shares not yet copying skip their pages
     * @param onCopied gets the batch's result once, on the thread of the share that ended last
     */
    RestoreBatch(List<PageSlot> sources, List<MemorySegment> targets, EngineRegion region, BooleanSupplier stopped,
                 Consumer<Copied> onCopied) {
        int n = sources.size();
        this.leases = new Lease[n];
        this.tiers = new QueryMetrics.Tier[n];
        for (int i = 0; i < n; i++) {
            leases[i] = sources.get(i).lease;
            tiers[i] = sources.get(i).tier;
        }
        this.targets = targets.toArray(MemorySegment[]::new);
        this.region = region;
        this.stopped = stopped;
        this.onCopied = onCopied;
    }

    /** Every page on the calling thread, then the report. */
    void copyAll() {
        synchronized (this) {
            sharesLeft = 1;
        }
        report(copy(cursor(0, leases.length)));
    }

    /**
     * Every page, on the calling thread and on one helper if {@code offer} hands the helper to an
     * idle thread: both take the next page from one counter, so a helper that starts late takes
     * fewer pages and one that never starts takes none. The caller then waits for a helper still
     * copying (at most the page it holds) and reports, always on the calling thread.
     */
    void copyShared(Predicate<Runnable> offer) {
        synchronized (this) {
            sharesLeft = 1;
        }
        AtomicInteger next = new AtomicInteger();
        IntSupplier pages = () -> {
            int i = next.getAndIncrement();
            return i < leases.length ? i : -1;
        };
        Helper helper = new Helper(pages, Thread.currentThread());
        boolean offered = offer.test(helper);
        Tally own = copy(pages);
        if (offered) own.add(helper.join());
        report(own);
    }

    /** At most {@code count} tasks of contiguous pages (at least one page each); each reports when it ends. */
    List<Runnable> shares(int count) {
        int n = Math.min(leases.length, Math.max(1, count));
        synchronized (this) {
            sharesLeft = n;
        }
        List<Runnable> tasks = new ArrayList<>(n);
        for (int t = 0; t < n; t++) {
            int from = leases.length * t / n;
            int to = leases.length * (t + 1) / n;
            tasks.add(() -> report(copy(cursor(from, to))));
        }
        return tasks;
    }

    /** Pages [{@code from}, {@code to}) in order, then -1. */
    private static IntSupplier cursor(int from, int to) {
        int[] at = {from};
        return () -> at[0] < to ? at[0]++ : -1;
    }

    private void report(Tally share) {
        Copied total = ended(share);
        if (total != null) onCopied.accept(total);
    }

    /** Copies the pages {@code pages} hands out until it returns -1, without the session lock. */
    private Tally copy(IntSupplier pages) {
        Tally t = new Tally();
        try {
            for (int i = pages.getAsInt(); i >= 0; i = pages.getAsInt()) {
                if (stopped.getAsBoolean()) break;
                MemorySegment src = leases[i].segment();
                MemorySegment.copy(src, 0, targets[i], 0, src.byteSize());
                t.bytes += src.byteSize();
                t.byTier[tiers[i].ordinal()] += src.byteSize();
            }
            VarHandle.releaseFence();
        } catch (InternalError fault) {
            // The JVM turns SIGBUS on a mapped page with no file behind it (the engine truncated its
            // region file) into this error. The region is unusable, not the Manager: the restore ends
            // FAILED NOT_FOUND and everything it holds drains as for any failed copy.
            region.markFaulted();
            RESTORE_FAULTS.log(System.Logger.Level.WARNING, "region-fault", "a restore into region file "
                    + region.path() + " faulted (" + fault.getMessage() + "): the engine shrank or replaced the"
                    + " file after REGISTER_REGION; the RESTORE ends FAILED and the region is refused from now on");
            t.failed = true;
            t.faulted = true;
        } catch (RuntimeException e) {
            UnexpectedErrors.record(UnexpectedErrors.Layer.QUERY, "RestoreBatch.copy", "a FAILED restore", e);
            t.failed = true;
        }
        return t;
    }

    /** One thread's share of a batch: bytes copied by source tier, and whether a copy failed or faulted. */
    private static final class Tally {
        long bytes;
        final long[] byTier = new long[QueryMetrics.Tier.values().length];
        boolean failed;
        boolean faulted;

        void add(Tally other) {
            bytes += other.bytes;
            for (int i = 0; i < byTier.length; i++) byTier[i] += other.byTier[i];
            failed |= other.failed;
            faulted |= other.faulted;
        }
    }

    /**
     * The second thread of {@link #copyShared}: it copies only if it starts before the caller is
     * done; {@link #join} either closes it unstarted or waits for its last page.
     */
    private final class Helper implements Runnable {
        private static final int IDLE = 0, RUNNING = 1, CLOSED = 2, DONE = 3;
        private final AtomicInteger state = new AtomicInteger(IDLE);
        private final IntSupplier pages;
        private final Thread caller;
        /** Written before {@code state} becomes DONE, read after. */
        private Tally result;

        Helper(IntSupplier pages, Thread caller) {
            this.pages = pages;
            this.caller = caller;
        }

        @Override
        public void run() {
            if (!state.compareAndSet(IDLE, RUNNING)) return;
            Tally copied = null;
            try {
                copied = copy(pages);
            } finally {
                // an Error out of the copy still ends the helper: the caller must not wait forever
                if (copied == null) {
                    copied = new Tally();
                    copied.failed = true;
                }
                result = copied;
                state.set(DONE);
                LockSupport.unpark(caller);
            }
        }

        /** What the helper copied: nothing if it had not started, else its pages once it ended. */
        Tally join() {
            if (state.compareAndSet(IDLE, CLOSED)) return new Tally();
            boolean interrupted = false;
            while (state.get() != DONE) {
                // Its last page (one copy) is all that is left: no timeout, and an interrupt
                // must not let the report, and the leases' release, run under a copy.
                LockSupport.park(this);
                if (Thread.interrupted()) interrupted = true;
            }
            if (interrupted) Thread.currentThread().interrupt();
            return result;
        }
    }

    /** Adds one share's result; the batch's total when it was the last share, else null. */
    private synchronized Copied ended(Tally share) {
        total.add(share);
        if (--sharesLeft > 0) return null;
        return new Copied(total.bytes, new QueryMetrics.TierCounts(total.byTier[QueryMetrics.Tier.DRAM.ordinal()],
                total.byTier[QueryMetrics.Tier.SSD.ordinal()], total.byTier[QueryMetrics.Tier.PEER.ordinal()]),
                total.failed, total.faulted);
    }
}
