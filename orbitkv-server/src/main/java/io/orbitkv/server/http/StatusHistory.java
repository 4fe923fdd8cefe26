package io.orbitkv.server.http;

import io.orbitkv.core.log.RateLimitedLog;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * The last minutes of the Manager's cumulative prefix-cache totals, sampled at a fixed period,
 * so the status page and {@code orbitkv status} can show hit ratio and throughput over time
 * without a Prometheus (deltas of consecutive samples are the rates).
 *
 * <p>Owns a bounded ring of {@link #capacity()} samples and one daemon platform thread that takes
 * a sample every period. Thread-safe: the ring is guarded by {@code this}; {@link #snapshot}
 * copies it. A sample that throws is skipped and logged (at most once per 10 s).
 *
 * <p>Design note: 300 samples at 2 s cover 10 minutes in ~20 KiB of JSON; the page refreshes
 * every 2 s, so one new point per refresh. The alternative, keeping history in the browser, shows
 * nothing until a page has been open for minutes and loses it on every reload.
 */
public final class StatusHistory implements AutoCloseable {

    /** Cumulative totals at one instant (epoch milliseconds); the rates are the deltas. */
    public record Sample(long timeMillis, long queriedTokens, long hitTokensDram, long hitTokensSsd,
                         long hitTokensPeer, long hitBytes, long restoredBytes) {
    }

    /** What {@code /status} shows: the period and the samples, oldest first. */
    public record Snapshot(long periodMillis, List<Sample> samples) {
    }

    private static final RateLimitedLog LOG = RateLimitedLog.tenSeconds(StatusHistory.class.getName());

    private final Supplier<Sample> source;
    private final long periodMillis;
    private final int capacity;
    // @GuardedBy("this")
    private final ArrayDeque<Sample> samples;
    private final ScheduledExecutorService timer;

    private StatusHistory(Supplier<Sample> source, long periodMillis, int capacity) {
        this.source = Objects.requireNonNull(source, "source");
        if (periodMillis <= 0 || capacity <= 1) throw new IllegalArgumentException("period " + periodMillis + ", capacity " + capacity);
        this.periodMillis = periodMillis;
        this.capacity = capacity;
        this.samples = new ArrayDeque<>(capacity);
        this.timer = Executors.newSingleThreadScheduledExecutor(
                Thread.ofPlatform().daemon().name("orbitkv-status-history").factory());
    }

    /** Starts sampling {@code source} now and every {@code periodMillis}, keeping {@code capacity} samples. */
    public static StatusHistory start(Supplier<Sample> source, long periodMillis, int capacity) {
        StatusHistory h = new StatusHistory(source, periodMillis, capacity);
        h.timer.scheduleAtFixedRate(h::sample, 0, periodMillis, TimeUnit.MILLISECONDS);
        return h;
    }

    /** The defaults: every 2 s, 10 minutes. */
    public static StatusHistory start(Supplier<Sample> source) {
        return start(source, 2_000, 300);
    }

    public int capacity() {
        return capacity;
    }

    private void sample() {
        Sample s;
        try {
            s = source.get();
        } catch (RuntimeException e) {
            LOG.log(System.Logger.Level.WARNING, "sample", "status history sample failed, skipped: " + e);
            return;
        }
        synchronized (this) {
            if (samples.size() == capacity) samples.removeFirst();
            samples.addLast(s);
        }
    }

    /** The samples kept, oldest first. */
    public synchronized Snapshot snapshot() {
        return new Snapshot(periodMillis, new ArrayList<>(samples));
    }

    /** Stops sampling. Idempotent. */
    @Override
    public void close() {
        timer.shutdownNow();
    }
}
