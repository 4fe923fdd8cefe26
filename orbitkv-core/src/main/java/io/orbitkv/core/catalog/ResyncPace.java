package io.orbitkv.core.catalog;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;

/**
 * The pace of a source's resync traffic (snapshot and handoff batches, all owners together): a
 * token bucket of {@code bytesPerSecond}, holding at most a tenth of a second's worth (and at least
 * one batch). A batch may go while the bucket is positive and then spends its bytes, possibly
 * into debt, so a batch larger than the bucket still goes, and the mean rate holds.
 *
 * <p>Thread model: thread-safe (owner streams are drained on parallel virtual threads); the
 * clock is the caller's ({@code nowNanos}, the publisher's pump time). Invariant: over any
 * interval, bytes spent ≤ bytesPerSecond × interval + capacity + one batch.
 */
final class ResyncPace {

    private final long bytesPerSecond;
    private final long capacity;
    private final Counter bytes;
    private final Counter paced;
    // @GuardedBy("this")
    private long tokens;
    // @GuardedBy("this")
    private long lastNanos;
    // @GuardedBy("this")
    private boolean started;

    ResyncPace(long bytesPerSecond, long minCapacity, MeterRegistry registry) {
        this.bytesPerSecond = bytesPerSecond;
        this.capacity = Math.max(bytesPerSecond / 10, minCapacity);
        this.tokens = capacity;
        this.bytes = Counter.builder("orbitkv_catalog_resync_bytes").description("snapshot and handoff bytes pushed (estimated)").register(registry);
        this.paced = Counter.builder("orbitkv_catalog_resync_paced").description("snapshot or handoff drains deferred by the resync pace").register(registry);
        io.micrometer.core.instrument.Gauge.builder("orbitkv_catalog_resync_bound_bytes_per_second", this, p -> p.bytesPerSecond)
                .description("pace of snapshot and handoff traffic").register(registry);
    }

    /** Whether a resync batch may go at {@code nowNanos} (counts a deferral when not). */
    synchronized boolean ready(long nowNanos) {
        if (!started) {
            started = true;
            lastNanos = nowNanos;
        }
        long elapsed = nowNanos - lastNanos;
        if (elapsed > 0) {
            long add = elapsed >= 1_000_000_000L ? capacity : elapsed * bytesPerSecond / 1_000_000_000L;
            tokens = Math.min(capacity, tokens + add);
            lastNanos = nowNanos;
        }
        if (tokens > 0) return true;
        paced.increment();
        return false;
    }

    /** Spends {@code n} bytes of a batch that went. */
    synchronized void spend(long n) {
        tokens -= n;
        bytes.increment(n);
    }
}
