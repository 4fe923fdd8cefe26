package io.orbitkv.core.transfer;

import io.orbitkv.core.cost.ResourceId;

import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The bounded executor of restore copies: {@code threads} platform threads
 * ({@code orbitkv-restore-<n>}) and at most {@code maxQueuedTasks} tasks queued or running.
 *
 * <p>Thread-safe. {@link #trySubmit} takes room for a whole batch or nothing, so a RESTORE is
 * either entirely submitted or refused (BUSY) with no effect. Invariant:
 * {@code 0 <= tasksInFlight() <= maxQueuedTasks}.
 *
 * <p>Design note: platform threads, not virtual ones, because a copy is a CPU-bound
 * {@code MemorySegment.copy} (2 MiB in ~0.1-0.2 ms at 10-20 GB/s) that would pin its carrier
 * anyway; a handful of threads saturates memory bandwidth, and more only adds contention. The
 * work queue itself is unbounded in type but cannot grow past the task budget checked here.
 */
public final class RestoreCopier implements AutoCloseable {

    private static final AtomicLong INCARNATIONS = new AtomicLong();

    private final ThreadPoolExecutor pool;
    private final int threads;
    private final int maxQueuedTasks;
    private final AtomicInteger inFlight = new AtomicInteger();
    private final AtomicLong refusals = new AtomicLong();
    private final AtomicLong helpers = new AtomicLong();
    private final ResourceId costResource = new ResourceId("restore:copier", INCARNATIONS.incrementAndGet());

    public RestoreCopier(int threads, int maxQueuedTasks) {
        if (threads < 1 || maxQueuedTasks < threads) {
            throw new IllegalArgumentException("need threads >= 1 and maxQueuedTasks >= threads: "
                    + threads + ", " + maxQueuedTasks);
        }
        this.threads = threads;
        this.maxQueuedTasks = maxQueuedTasks;
        AtomicInteger names = new AtomicInteger();
        this.pool = new ThreadPoolExecutor(threads, threads, 0, TimeUnit.MILLISECONDS, new LinkedBlockingQueue<>(),
                r -> Thread.ofPlatform().name("orbitkv-restore-" + names.incrementAndGet()).daemon().unstarted(r));
    }

    /** Submits every task, or none when the budget lacks room for all of them (false). */
    public boolean trySubmit(List<Runnable> tasks) {
        if (!reserve(tasks.size(), maxQueuedTasks)) {
            refusals.incrementAndGet();
            return false;
        }
        for (Runnable task : tasks) pool.execute(counted(task));
        return true;
    }

    /**
     * Hands {@code task} to a copy thread only if one is idle now (fewer tasks in flight than
     * threads), so a helper never waits behind other restores' copies; false leaves it unrun.
     */
    public boolean tryHelp(Runnable task) {
        if (!reserve(1, threads)) return false;
        try {
            pool.execute(counted(task));
        } catch (RejectedExecutionException closing) {
            inFlight.decrementAndGet();
            return false;
        }
        helpers.incrementAndGet();
        return true;
    }

    /** Takes {@code n} places in the budget if that leaves at most {@code limit} in flight and the pool is open. */
    private boolean reserve(int n, int limit) {
        for (;;) {
            int now = inFlight.get();
            if (n > limit - now || pool.isShutdown()) return false;
            if (inFlight.compareAndSet(now, now + n)) return true;
        }
    }

    /** {@code task}, giving back its place in the budget when it ends. */
    private Runnable counted(Runnable task) {
        return () -> {
            try {
                task.run();
            } finally {
                inFlight.decrementAndGet();
            }
        };
    }

    /** The resource restore cost samples are keyed by: this copier, with a per-instance incarnation. */
    public ResourceId costResource() {
        return costResource;
    }

    /** Copy threads: a restore is split into at most this many tasks. */
    public int parallelism() {
        return threads;
    }

    /** Tasks queued or running now. */
    public int tasksInFlight() {
        return inFlight.get();
    }

    /** Helpers {@link #tryHelp} handed to an idle thread. */
    public long helpers() {
        return helpers.get();
    }

    /** Batches refused because the budget was full. */
    public long refusals() {
        return refusals.get();
    }

    /** Lets queued and running copies finish (bounded by {@code timeoutNanos}); refuses new ones. */
    public boolean close(long timeoutNanos) throws InterruptedException {
        pool.shutdown();
        return pool.awaitTermination(timeoutNanos, TimeUnit.NANOSECONDS);
    }

    @Override
    public void close() {
        try {
            close(TimeUnit.SECONDS.toNanos(30));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
