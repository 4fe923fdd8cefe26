package io.orbitkv.core.query;

import io.orbitkv.core.log.UnexpectedErrors;
import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.core.transfer.EngineRegion;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;

/**
 * The copies of one accepted RESTORE: leased source pages, their destination pages in the
 * engine's region, split into shares that run on the connection's thread ({@link #copyAll}) or
 * as copier tasks ({@link #shares}); the share that ends last hands the batch's {@link Copied}
 * to {@code onCopied}, exactly once.
 *
 * <p>Thread model: built under the session lock; shares run without it, on any threads, and read
 * only final fields, the leases (held by the operation until {@code onCopied} ran) and
 * {@code stopped}. The running totals are guarded by this object's monitor, taken once per share.
 *
 * <p>Invariant: {@code onCopied} runs once, after every share ended (copied, stopped or failed),
 * with the sum of their bytes.
 *
 * <p>Design note: one report per batch, not one per share: a RESTORE split into 4 shares used to
 * hop to a callback thread and take the session lock 4 times; now the last share alone does
 * (docs/performance.md, Manager, "three hand-offs per restore").
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
    private long bytes;
    private long dram;
    private long ssd;
    private long peer;
    private boolean failed;
    private boolean regionFault;

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
        copy(0, leases.length);
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
            tasks.add(() -> copy(from, to));
        }
        return tasks;
    }

    /** Copies pages [{@code from}, {@code to}), without the session lock. */
    private void copy(int from, int to) {
        long copied = 0;
        long[] byTier = new long[QueryMetrics.Tier.values().length];
        boolean copyFailed = false;
        boolean faulted = false;
        try {
            for (int i = from; i < to; i++) {
                if (stopped.getAsBoolean()) break;
                MemorySegment src = leases[i].segment();
                MemorySegment.copy(src, 0, targets[i], 0, src.byteSize());
                copied += src.byteSize();
                byTier[tiers[i].ordinal()] += src.byteSize();
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
            copyFailed = true;
            faulted = true;
        } catch (RuntimeException e) {
            UnexpectedErrors.record(UnexpectedErrors.Layer.QUERY, "RestoreBatch.copy", "a FAILED restore", e);
            copyFailed = true;
        }
        Copied total = ended(copied, byTier, copyFailed, faulted);
        if (total != null) onCopied.accept(total);
    }

    /** Adds one share's result; the batch's total when it was the last share, else null. */
    private synchronized Copied ended(long copied, long[] byTier, boolean copyFailed, boolean faulted) {
        bytes += copied;
        dram += byTier[QueryMetrics.Tier.DRAM.ordinal()];
        ssd += byTier[QueryMetrics.Tier.SSD.ordinal()];
        peer += byTier[QueryMetrics.Tier.PEER.ordinal()];
        failed |= copyFailed;
        regionFault |= faulted;
        if (--sharesLeft > 0) return null;
        return new Copied(bytes, new QueryMetrics.TierCounts(dram, ssd, peer), failed, regionFault);
    }
}
