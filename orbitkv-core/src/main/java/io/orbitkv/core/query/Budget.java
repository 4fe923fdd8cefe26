package io.orbitkv.core.query;

import java.util.concurrent.atomic.AtomicLong;

/**
 * A named, bounded count of some unit (leases, bytes) that callers take before they hold the
 * thing it counts and give back when they let it go.
 *
 * <p>Thread-safe and lock-free: {@link #tryAcquire} is a CAS loop that never passes the
 * capacity, so a refused caller changes nothing. Invariant: {@code 0 <= used() <= capacity()}; a
 * release of more than is used is a bug and throws.
 *
 * <p>Design note: one atomic per budget rather than a semaphore, because a query takes a whole
 * batch at once (up to 65,536 leases, or a staging set's bytes) all-or-nothing, and
 * {@code Semaphore.tryAcquire(n)} would need {@code n} to fit an int and offers no cheap
 * {@code used()} for gauges.
 */
public final class Budget {

    private final String name;
    private final String unit;
    private final long capacity;
    private final AtomicLong used = new AtomicLong();

    public Budget(String name, String unit, long capacity) {
        if (capacity < 1) throw new IllegalArgumentException(name + " capacity must be >= 1: " + capacity);
        this.name = name;
        this.unit = unit;
        this.capacity = capacity;
    }

    /** Takes {@code amount} if it fits; false (and nothing taken) otherwise. Zero always fits. */
    public boolean tryAcquire(long amount) {
        if (amount < 0) throw new IllegalArgumentException("negative amount " + amount + " of " + name);
        if (amount == 0) return true;
        for (;;) {
            long now = used.get();
            if (amount > capacity - now) return false;
            if (used.compareAndSet(now, now + amount)) return true;
        }
    }

    /** Gives back {@code amount} taken earlier. */
    public void release(long amount) {
        if (amount < 0) throw new IllegalArgumentException("negative amount " + amount + " of " + name);
        if (amount == 0) return;
        long after = used.addAndGet(-amount);
        if (after < 0) throw new IllegalStateException(name + " released below zero: " + after + " " + unit);
    }

    public long used() {
        return used.get();
    }

    /** What can still be acquired now (a snapshot). */
    public long available() {
        return Math.max(0, capacity() - used());
    }

    public long capacity() {
        return capacity;
    }

    public String name() {
        return name;
    }

    @Override
    public String toString() {
        return name + "[" + used.get() + "/" + capacity + " " + unit + "]";
    }
}
