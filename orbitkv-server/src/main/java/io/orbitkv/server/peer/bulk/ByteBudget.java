package io.orbitkv.server.peer.bulk;

import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A named budget of bytes (in-flight payload at a requester, send queue at a source): a taker
 * waits a bounded time for room and then gives up, never queues without bound. Exposes its use
 * as a Micrometer gauge and keeps the highest use seen (tests check the bound held).
 *
 * <p>Thread model: thread-safe under one lock; waiters are the data plane's connection threads
 * (platform threads, one per connection), never a session or event-loop thread.
 *
 * <p>Invariant: {@code 0 <= used() <= capacityBytes} at all times; {@code peak() <= capacityBytes}.
 */
final class ByteBudget {

    private final long capacityBytes;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition freed = lock.newCondition();
    // @GuardedBy("lock")
    private long used;
    // @GuardedBy("lock")
    private long peak;

    ByteBudget(long capacityBytes) {
        if (capacityBytes <= 0) throw new IllegalArgumentException("capacityBytes: " + capacityBytes);
        this.capacityBytes = capacityBytes;
    }

    /** Registers {@code name} with {@code tags} as a gauge of {@link #used()}; returns the gauge to remove later. */
    Gauge register(MeterRegistry registry, String name, Tags tags, String description) {
        return Gauge.builder(name, this, ByteBudget::used).tags(tags).baseUnit("bytes").description(description)
                .register(registry);
    }

    /**
     * Takes {@code bytes}, waiting up to {@code waitNanos} for room. False (nothing taken) when
     * {@code bytes} exceeds the capacity, the wait ran out, or the thread was interrupted.
     */
    boolean acquire(long bytes, long waitNanos) {
        if (bytes <= 0 || bytes > capacityBytes) return bytes == 0;
        long remaining = waitNanos;
        lock.lock();
        try {
            while (used + bytes > capacityBytes) {
                if (remaining <= 0) return false;
                try {
                    remaining = freed.awaitNanos(remaining);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return false;
                }
            }
            used += bytes;
            peak = Math.max(peak, used);
            return true;
        } finally {
            lock.unlock();
        }
    }

    void release(long bytes) {
        if (bytes <= 0) return;
        lock.lock();
        try {
            if (bytes > used) throw new IllegalStateException("released " + bytes + " of " + used + " bytes");
            used -= bytes;
            freed.signalAll();
        } finally {
            lock.unlock();
        }
    }

    long used() {
        lock.lock();
        try {
            return used;
        } finally {
            lock.unlock();
        }
    }

    long peak() {
        lock.lock();
        try {
            return peak;
        } finally {
            lock.unlock();
        }
    }

    long capacityBytes() {
        return capacityBytes;
    }

    static long nanos(java.time.Duration d) {
        return TimeUnit.NANOSECONDS.convert(d);
    }
}
