package io.orbitkv.core.cost;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The bounded table of estimates: {@link CostKey} → EWMA mean and EWMA absolute error of the
 * successful samples, with warm-up, idle expiry and least-recently-used eviction.
 *
 * <p>Owns the table and its counters. Only successful samples reach it ({@link CostObserver}
 * filters censored ones).
 *
 * <p>Thread model: thread-safe. Every access takes {@code lock} with {@code tryLock()}: an
 * execution thread that finds it held drops its update (counted) or gets no lookup, so the
 * estimator never blocks an I/O completion.
 *
 * <p>Invariants: {@code entries.size() <= maxEntries}; an entry is returned as
 * {@link Lookup.Warm} only with at least {@code warmSamples} samples and an idle time under
 * {@code idleExpiry}; an expired entry is dropped when touched and restarts from zero samples.
 *
 * <p>Design note: a {@link LinkedHashMap} in access order under one lock, rather than a
 * Caffeine cache: the table holds 512 entries (~150 B each, ~75 KB), updates are one per
 * completed operation (thousands per second, not millions), and the eviction and expiry rules
 * here are part of the estimate's meaning (a stale entry must warm up again, which a cache's
 * silent refresh would hide). The critical section is a hash lookup and four multiply-adds
 * (~100 ns), so contention is rare and dropping on it loses little.
 */
public final class CostEstimator {

    /** Outcome of {@link #train}. */
    public enum Update { TRAINED, DROPPED_CONTENDED }

    private static final class Entry {
        double meanNanos;
        double errorNanos;
        long samples;
        long lastNanos;
    }

    private final CostConfig config;
    private final ReentrantLock lock = new ReentrantLock();
    /** Access-ordered: the eldest is the least recently used. Guarded by {@code lock}. */
    private final LinkedHashMap<CostKey, Entry> entries;
    private final LongAdder dropped = new LongAdder();
    private final LongAdder evicted = new LongAdder();
    private final LongAdder expired = new LongAdder();

    public CostEstimator(CostConfig config) {
        this.config = config;
        this.entries = new LinkedHashMap<>(Math.min(config.maxEntries(), 1024) * 2, 0.75f, true);
    }

    /** Adds one successful sample of {@code sampleNanos} to {@code key} at {@code nowNanos}. */
    public Update train(CostKey key, long sampleNanos, long nowNanos) {
        if (sampleNanos < 0) throw new IllegalArgumentException("negative sample: " + sampleNanos);
        if (!lock.tryLock()) {
            dropped.increment();
            return Update.DROPPED_CONTENDED;
        }
        try {
            Entry e = liveEntry(key, nowNanos);
            if (e == null) {
                if (entries.size() >= config.maxEntries()) evictEldest();
                e = new Entry();
                entries.put(key, e);
            }
            double w = config.ewmaWeight();
            if (e.samples == 0) {
                e.meanNanos = sampleNanos;
                e.errorNanos = 0;
            } else {
                e.errorNanos += w * (Math.abs(sampleNanos - e.meanNanos) - e.errorNanos);
                e.meanNanos += w * (sampleNanos - e.meanNanos);
            }
            e.samples++;
            e.lastNanos = nowNanos;
            return Update.TRAINED;
        } finally {
            lock.unlock();
        }
    }

    /** Looks up several keys under one lock hold; empty when the lock is contended (counted). */
    public Optional<List<Lookup>> tryLookup(List<CostKey> keys, long nowNanos) {
        if (!lock.tryLock()) {
            dropped.increment();
            return Optional.empty();
        }
        try {
            List<Lookup> out = new ArrayList<>(keys.size());
            for (CostKey k : keys) out.add(lookupLocked(k, nowNanos));
            return Optional.of(out);
        } finally {
            lock.unlock();
        }
    }

    /** Looks up one key, waiting for the lock (status pages and tests, not execution threads). */
    public Lookup lookup(CostKey key, long nowNanos) {
        lock.lock();
        try {
            return lookupLocked(key, nowNanos);
        } finally {
            lock.unlock();
        }
    }

    private Lookup lookupLocked(CostKey key, long nowNanos) {
        Entry e = liveEntry(key, nowNanos);
        if (e == null) return new Lookup.Missing();
        if (e.samples < config.warmSamples()) return new Lookup.Cold(e.samples);
        return new Lookup.Warm(new Estimate(e.meanNanos, e.errorNanos, e.samples, nowNanos - e.lastNanos));
    }

    /** The entry for {@code key} unless absent or idle for the expiry (then it is removed). */
    private Entry liveEntry(CostKey key, long nowNanos) {
        Entry e = entries.get(key);
        if (e != null && nowNanos - e.lastNanos >= config.idleExpiryNanos()) {
            entries.remove(key);
            expired.increment();
            return null;
        }
        return e;
    }

    private void evictEldest() {
        var it = entries.entrySet().iterator();
        it.next();
        it.remove();
        evicted.increment();
    }

    /** Entries held now (expired ones are counted until touched). */
    public int size() {
        lock.lock();
        try {
            return entries.size();
        } finally {
            lock.unlock();
        }
    }

    /** Entries warm at {@code nowNanos}. */
    public int warmEntries(long nowNanos) {
        lock.lock();
        try {
            int n = 0;
            for (Entry e : entries.values()) {
                if (e.samples >= config.warmSamples() && nowNanos - e.lastNanos < config.idleExpiryNanos()) n++;
            }
            return n;
        } finally {
            lock.unlock();
        }
    }

    /** Updates and lookups dropped because another thread held the lock. */
    public long droppedContended() {
        return dropped.sum();
    }

    public long evictedEntries() {
        return evicted.sum();
    }

    public long expiredEntries() {
        return expired.sum();
    }

    /** Holds the lock for the duration of {@code r} (tests: contention without timing races). */
    void holdLockWhile(Runnable r) {
        lock.lock();
        try {
            r.run();
        } finally {
            lock.unlock();
        }
    }
}
