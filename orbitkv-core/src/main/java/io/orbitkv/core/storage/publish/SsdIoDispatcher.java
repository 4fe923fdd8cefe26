package io.orbitkv.core.storage.publish;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;

import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The SSD I/O dispatcher in front of the store: keeps at most {@code maxInFlightOps} operations
 * submitted (set it to the store's {@code ioThreads}) and holds the rest in an
 * {@link IoScheduler}'s two lanes, so restore reads overtake queued publish writes and a waiting
 * write is started after at most {@code maxReadsWhileWriteWaits} reads.
 *
 * <p>Owns the scheduler, the in-flight count and the lane meters. Thread model: thread-safe;
 * one lock guards the scheduler and the count, and operations are started outside it, on the
 * submitting thread or on the thread that completed the previous operation (an SSD worker).
 * {@link IoOp#start()} must therefore only submit. Invariants: {@code inFlight <=
 * maxInFlightOps}; every accepted operation is either started once or dropped once; after
 * {@link #close} returns nothing is queued and nothing is in flight (unless the bounded wait ran
 * out, which is logged).
 *
 * <p>Design note: the store's own worker pool is FIFO; if the pipeline submitted every write as
 * it was admitted, a restore read would queue behind up to 256 writes (256 × 2 MiB at ~3 GB/s is
 * ~170 ms). Holding back everything beyond the {@code ioThreads} the device is busy with keeps
 * the priority decision here, where it can still be made, at the cost of one lock round per
 * operation (~100 ns against 0.1–1 ms of device time).
 */
public final class SsdIoDispatcher implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(SsdIoDispatcher.class.getName());

    /** Outcome of {@link #submitRead}. */
    public enum ReadOffer {
        /** Queued or started. */
        QUEUED,
        /** The read lane holds {@code maxQueuedReads}; nothing was queued (the caller answers busy). */
        LANE_FULL,
        /** The dispatcher is closing; nothing was queued. */
        CLOSED
    }

    /** Outcome of {@link #submitWrite}. */
    public enum WriteOffer {
        /** Queued or started. */
        QUEUED,
        /** Queued; the lane was full, so its oldest write was dropped ({@link IoOp.DropReason#LANE_FULL}). */
        QUEUED_DISPLACING_OLDEST,
        /** The dispatcher is closing; nothing was queued. */
        CLOSED
    }

    private final int maxInFlightOps;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition idle = lock.newCondition();
    // @GuardedBy("lock")
    private final IoScheduler<IoOp, IoOp> scheduler;
    // @GuardedBy("lock")
    private int inFlight;
    // @GuardedBy("lock")
    private boolean closed;

    private final MeterRegistry registry;
    private final List<Meter> meters = new ArrayList<>();
    private final Counter readsStarted;
    private final Counter writesStarted;
    private final Counter startFailures;
    private final Map<IoOp.DropReason, Counter> dropped = new EnumMap<>(IoOp.DropReason.class);

    /**
     * @param maxInFlightOps          operations submitted to the store at once (its {@code ioThreads})
     * @param maxQueuedReads          read lane bound, in operations
     * @param maxQueuedWrites         write lane bound, in operations
     * @param maxReadsWhileWriteWaits K: reads started while a write waits before that write goes
     * @param registry                meters ({@code orbitkv.publish.io.*}, tag {@code store})
     * @param storeName               tag value naming the store
     */
    public SsdIoDispatcher(int maxInFlightOps, int maxQueuedReads, int maxQueuedWrites, int maxReadsWhileWriteWaits,
                           MeterRegistry registry, String storeName) {
        if (maxInFlightOps <= 0) throw new IllegalArgumentException("maxInFlightOps must be positive");
        this.maxInFlightOps = maxInFlightOps;
        this.scheduler = new IoScheduler<>(maxQueuedReads, maxQueuedWrites, maxReadsWhileWriteWaits);
        this.registry = registry;
        Tags tags = Tags.of("store", storeName);
        meters.add(Gauge.builder("orbitkv.publish.io.read.lane.depth", this, d -> d.depth(true))
                .tags(tags).description("restore reads waiting for a submission slot").register(registry));
        meters.add(Gauge.builder("orbitkv.publish.io.write.lane.depth", this, d -> d.depth(false))
                .tags(tags).description("SSD writes waiting for a submission slot").register(registry));
        meters.add(Gauge.builder("orbitkv.publish.io.inflight", this, SsdIoDispatcher::inFlight)
                .tags(tags).description("operations submitted to the store").register(registry));
        readsStarted = counter("orbitkv.publish.io.started", tags.and("lane", "read"));
        writesStarted = counter("orbitkv.publish.io.started", tags.and("lane", "write"));
        startFailures = counter("orbitkv.publish.io.start.failures", tags);
        for (IoOp.DropReason reason : IoOp.DropReason.values()) {
            dropped.put(reason, counter("orbitkv.publish.io.dropped",
                    tags.and("reason", reason.name().toLowerCase(Locale.ROOT))));
        }
    }

    /** Queues a read (it goes before queued writes, within the starvation bound). Never blocks. */
    public ReadOffer submitRead(IoOp op) {
        lock.lock();
        try {
            if (closed) return ReadOffer.CLOSED;
            if (!scheduler.offerRead(op)) return ReadOffer.LANE_FULL;
        } finally {
            lock.unlock();
        }
        pump();
        return ReadOffer.QUEUED;
    }

    /** Queues a write; a full lane drops its oldest write to make room. Never blocks. */
    public WriteOffer submitWrite(IoOp op) {
        Optional<IoOp> displaced;
        lock.lock();
        try {
            if (closed) return WriteOffer.CLOSED;
            displaced = Optional.empty();
            if (!scheduler.offerWrite(op)) {
                displaced = scheduler.pollOldestWrite();
                scheduler.offerWrite(op);
            }
        } finally {
            lock.unlock();
        }
        displaced.ifPresent(d -> drop(d, IoOp.DropReason.LANE_FULL));
        pump();
        return displaced.isPresent() ? WriteOffer.QUEUED_DISPLACING_OLDEST : WriteOffer.QUEUED;
    }

    /** Operations submitted to the store and not yet complete. */
    public int inFlight() {
        lock.lock();
        try {
            return inFlight;
        } finally {
            lock.unlock();
        }
    }

    /** Operations waiting in the read ({@code true}) or write lane. */
    public int depth(boolean reads) {
        lock.lock();
        try {
            return reads ? scheduler.queuedReads() : scheduler.queuedWrites();
        } finally {
            lock.unlock();
        }
    }

    public int maxInFlightOps() {
        return maxInFlightOps;
    }

    /**
     * Stops accepting operations, lets queued and in-flight ones run for up to
     * {@code drainTimeoutNanos}, then drops what is still queued ({@link IoOp.DropReason#CLOSED})
     * and waits (same bound again) for the in-flight rest. Returns true when fully drained.
     */
    public boolean close(long drainTimeoutNanos) {
        List<IoOp> leftover = new ArrayList<>();
        lock.lock();
        try {
            closed = true;
            awaitIdle(drainTimeoutNanos, true);
            for (Optional<IoScheduler.Work<IoOp, IoOp>> w = scheduler.poll(); w.isPresent(); w = scheduler.poll()) {
                leftover.add(unwrap(w.get(), false));
            }
        } finally {
            lock.unlock();
        }
        for (IoOp op : leftover) drop(op, IoOp.DropReason.CLOSED);
        boolean drained;
        lock.lock();
        try {
            drained = awaitIdle(drainTimeoutNanos, false);
        } finally {
            lock.unlock();
        }
        if (!drained) LOG.log(System.Logger.Level.WARNING, "SSD dispatcher closed with operations still in flight");
        for (Meter m : meters) registry.remove(m);
        return drained && leftover.isEmpty();
    }

    @Override
    public void close() {
        close(TimeUnit.SECONDS.toNanos(10));
    }

    // @GuardedBy("lock")
    private boolean awaitIdle(long timeoutNanos, boolean includeQueued) {
        long remaining = timeoutNanos;
        while (inFlight > 0 || (includeQueued && scheduler.queuedReads() + scheduler.queuedWrites() > 0)) {
            if (remaining <= 0) return false;
            try {
                remaining = idle.awaitNanos(remaining);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return false;
            }
        }
        return true;
    }

    /** Starts queued operations while submission slots are free. */
    private void pump() {
        for (;;) {
            IoOp next;
            lock.lock();
            try {
                if (inFlight >= maxInFlightOps) return;
                Optional<IoScheduler.Work<IoOp, IoOp>> work = scheduler.poll();
                if (work.isEmpty()) return;
                inFlight++;
                next = unwrap(work.get(), true);
            } finally {
                lock.unlock();
            }
            start(next);
        }
    }

    private IoOp unwrap(IoScheduler.Work<IoOp, IoOp> work, boolean starting) {
        return switch (work) {
            case IoScheduler.Work.Read<IoOp, IoOp>(IoOp op) -> {
                if (starting) readsStarted.increment();
                yield op;
            }
            case IoScheduler.Work.Write<IoOp, IoOp>(IoOp op) -> {
                if (starting) writesStarted.increment();
                yield op;
            }
        };
    }

    private void start(IoOp op) {
        CompletableFuture<?> done;
        try {
            done = op.start();
        } catch (RuntimeException e) {
            startFailures.increment();
            LOG.log(System.Logger.Level.ERROR, "SSD operation failed to start", e);
            onDone();
            return;
        }
        done.whenComplete((ignored, failure) -> onDone());
    }

    private void onDone() {
        lock.lock();
        try {
            inFlight--;
            idle.signalAll();
        } finally {
            lock.unlock();
        }
        pump();
    }

    private void drop(IoOp op, IoOp.DropReason reason) {
        dropped.get(reason).increment();
        try {
            op.drop(reason);
        } catch (RuntimeException e) {
            LOG.log(System.Logger.Level.ERROR, "dropping an SSD operation failed", e);
        }
    }

    private Counter counter(String name, Tags tags) {
        Counter c = Counter.builder(name).tags(tags).description(switch (name) {
            case "orbitkv.publish.io.started" -> "SSD operations started, by lane";
            case "orbitkv.publish.io.start.failures" -> "SSD operations whose start threw";
            default -> "SSD operations dropped before they started, by reason";
        }).register(registry);
        meters.add(c);
        return c;
    }
}
