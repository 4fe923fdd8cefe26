package io.orbitkv.core.storage.publish;

/**
 * The SSD write budget: a token bucket in bytes per second plus a bound on queued write bytes.
 *
 * <p>Owned by the publish pipeline; not thread-safe on its own (the pipeline calls it under its
 * lock). Time comes in as a parameter so tests drive the clock.
 *
 * <p>Design note: a token bucket (rate {@code bytesPerSecond}, depth {@code burstBytes}) rather
 * than a fixed window, because SSD admission happens per 256 KiB–2 MiB block and a window would
 * let two windows' worth through at a boundary. The queue bound is separate: the rate limits
 * device wear and foreground interference, the queue bound limits memory pinned by pending
 * writes. A block larger than the burst can still pass once the bucket is full, so one huge
 * block cannot starve forever.
 */
public final class WriteBudget {

    /** Outcome of {@link #tryAdmit}. */
    public enum Admission { ADMITTED, OVER_RATE, QUEUE_FULL }

    private final long bytesPerSecond;
    private final long burstBytes;
    private final long maxQueuedBytes;

    private double tokens;
    private long lastRefillNanos;
    private long queuedBytes;

    /**
     * @param bytesPerSecond sustained SSD write rate allowed; {@code Long.MAX_VALUE} = unlimited
     * @param burstBytes     bucket depth
     * @param maxQueuedBytes bound on bytes admitted but not yet written
     * @param nowNanos       the clock at construction (the bucket starts full)
     */
    public WriteBudget(long bytesPerSecond, long burstBytes, long maxQueuedBytes, long nowNanos) {
        if (bytesPerSecond <= 0 || burstBytes <= 0 || maxQueuedBytes <= 0) {
            throw new IllegalArgumentException("write budget values must be positive");
        }
        this.bytesPerSecond = bytesPerSecond;
        this.burstBytes = burstBytes;
        this.maxQueuedBytes = maxQueuedBytes;
        this.tokens = burstBytes;
        this.lastRefillNanos = nowNanos;
    }

    /** Admits a write of {@code bytes} if the rate and the queue bound allow; no side effect otherwise. */
    public Admission tryAdmit(long bytes, long nowNanos) {
        refill(nowNanos);
        if (queuedBytes + bytes > maxQueuedBytes) {
            return Admission.QUEUE_FULL;
        }
        // A block larger than the bucket passes when the bucket is full (see class note).
        double need = Math.min(bytes, burstBytes);
        if (tokens < need) {
            return Admission.OVER_RATE;
        }
        tokens -= bytes;
        queuedBytes += bytes;
        return Admission.ADMITTED;
    }

    /** Whether {@link #tryAdmit} would admit {@code bytes} now; spends nothing. */
    public boolean mayAdmitNow(long bytes, long nowNanos) {
        refill(nowNanos);
        return queuedBytes + bytes <= maxQueuedBytes && tokens >= Math.min(bytes, burstBytes);
    }

    /**
     * Admits a write of {@code bytes} if the queue bound allows, without asking the rate or
     * spending tokens: for the blocks a clean stop still writes (a bounded, one-off amount).
     */
    public Admission tryAdmitIgnoringRate(long bytes) {
        if (queuedBytes + bytes > maxQueuedBytes) return Admission.QUEUE_FULL;
        queuedBytes += bytes;
        return Admission.ADMITTED;
    }

    /** A previously admitted write finished (written, failed or dropped): its bytes leave the queue. */
    public void onDequeued(long bytes) {
        queuedBytes = Math.max(0, queuedBytes - bytes);
    }

    public long queuedBytes() {
        return queuedBytes;
    }

    public long maxQueuedBytes() {
        return maxQueuedBytes;
    }

    private void refill(long nowNanos) {
        long elapsed = nowNanos - lastRefillNanos;
        if (elapsed <= 0) return;
        lastRefillNanos = nowNanos;
        if (bytesPerSecond == Long.MAX_VALUE) {
            tokens = burstBytes;
            return;
        }
        tokens = Math.min(burstBytes, tokens + (double) bytesPerSecond * elapsed / 1e9);
    }
}
