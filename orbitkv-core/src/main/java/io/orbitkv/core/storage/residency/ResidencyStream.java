package io.orbitkv.core.storage.residency;

import io.orbitkv.state.StateKey;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The per-owner stream of residency changes: every DRAM insert/evict and SSD commit/drop of a
 * key, in one total order with a monotonically increasing sequence.
 *
 * <p>Owns a bounded ring of the most recent {@code capacityEvents} events. Thread-safe: storage
 * owners call {@link #append} from their own threads; consumers (the catalog streamer, tests)
 * call {@link #readFrom}. A consumer that falls behind by more than the ring gets
 * {@link Batch#gap()} set and must resynchronise from a snapshot of the tiers; the stream never
 * blocks a storage owner and never grows.
 *
 * <p>Design note: appends take one short lock (a sequence bump and an array store, ~20 ns).
 * A lock-free MPSC ring (JCTools style) was not chosen because appends happen once per page
 * insert/evict, orders of magnitude below lock throughput, and a lock makes "sequence order ==
 * ring order" trivially true.
 */
public final class ResidencyStream {

    /** Events from a read: {@code gap} is true when events before {@code events.get(0)} were lost. */
    public record Batch(List<ResidencyEvent> events, boolean gap, long nextSequence) {}

    private final ReentrantLock lock = new ReentrantLock();
    // @GuardedBy("lock")
    private final ResidencyEvent[] ring;
    // @GuardedBy("lock")
    private long lastSequence;

    /** Set once by the store's owner before any tier appends; read by every appending thread. */
    private volatile RetentionLedger retention;
    /** As {@link #retention}: told of every SSD change too (the tenant SSD ledger). */
    private volatile SsdChange ssdChange;

    /** Told of each SSD extent indexed or dropped, with its namespace. */
    @FunctionalInterface
    public interface SsdChange {
        /** An extent of {@code key} in {@code namespace} ({@code payloadBytes}) was indexed or dropped. */
        void onSsd(io.orbitkv.state.NamespaceDigest namespace, StateKey key, ResidencyEvent.Kind kind, int payloadBytes);
    }

    /** Makes {@code listener} learn every SSD change; once, before any tier appends. */
    public void attach(SsdChange listener) {
        if (ssdChange != null) throw new IllegalStateException("an SSD change listener is already attached");
        ssdChange = java.util.Objects.requireNonNull(listener, "listener");
    }

    /** Makes {@code ledger} learn every residency change with its namespace (see {@link RetentionLedger}). */
    public void attach(RetentionLedger ledger) {
        if (retention != null) throw new IllegalStateException("a retention ledger is already attached");
        retention = java.util.Objects.requireNonNull(ledger, "ledger");
    }

    /** The attached ledger; fails when none is attached. */
    public RetentionLedger retention() {
        RetentionLedger r = retention;
        if (r == null) throw new IllegalStateException("no retention ledger attached");
        return r;
    }

    /** A DRAM change of an image of namespace id {@code namespaceId}, for the attached ledger (if any). */
    public void retainedInDram(int namespaceId, StateKey key, ResidencyEvent.Kind kind, int lengthBytes) {
        RetentionLedger r = retention;
        if (r != null) r.dram(namespaceId, key, kind, lengthBytes);
    }

    /** An SSD change of an extent of {@code namespace}, for the attached ledger (if any). */
    public void retainedOnSsd(io.orbitkv.state.NamespaceDigest namespace, StateKey key, ResidencyEvent.Kind kind, int lengthBytes) {
        RetentionLedger r = retention;
        if (r != null) r.ssd(namespace, key, kind, lengthBytes);
        SsdChange c = ssdChange;
        if (c != null) c.onSsd(namespace, key, kind, lengthBytes);
    }

    public ResidencyStream(int capacityEvents) {
        if (capacityEvents <= 0) throw new IllegalArgumentException("capacityEvents must be positive");
        this.ring = new ResidencyEvent[capacityEvents];
    }

    /** Appends an event whose page length is unknown (0) and returns its sequence. */
    public long append(StateKey key, ResidencyEvent.Medium medium, ResidencyEvent.Kind kind, long generation) {
        return append(key, medium, kind, generation, 0);
    }

    /**
     * Appends an event for a page of {@code lengthBytes} payload bytes and returns its sequence.
     * Never blocks beyond the short lock.
     */
    public long append(StateKey key, ResidencyEvent.Medium medium, ResidencyEvent.Kind kind, long generation,
                       int lengthBytes) {
        lock.lock();
        try {
            long seq = ++lastSequence;
            ring[(int) (seq % ring.length)] = new ResidencyEvent(seq, key, medium, kind, generation, lengthBytes);
            return seq;
        } finally {
            lock.unlock();
        }
    }

    /** The sequence of the newest event, 0 when none was appended. */
    public long lastSequence() {
        lock.lock();
        try {
            return lastSequence;
        } finally {
            lock.unlock();
        }
    }

    /** Bound of the ring, in events. */
    public int capacityEvents() {
        return ring.length;
    }

    /**
     * Reads up to {@code maxEvents} events with sequence ≥ {@code fromSequence} (1 = from the
     * beginning). If some of those were already overwritten, {@code gap} is true and the batch
     * starts at the oldest retained event.
     */
    public Batch readFrom(long fromSequence, int maxEvents) {
        lock.lock();
        try {
            long oldestRetained = Math.max(1, lastSequence - ring.length + 1);
            boolean gap = fromSequence < oldestRetained && lastSequence > 0 && fromSequence <= lastSequence;
            long start = Math.max(fromSequence, oldestRetained);
            List<ResidencyEvent> out = new ArrayList<>();
            for (long s = start; s <= lastSequence && out.size() < maxEvents; s++) {
                out.add(ring[(int) (s % ring.length)]);
            }
            long next = out.isEmpty() ? Math.max(start, fromSequence) : out.getLast().sequence() + 1;
            return new Batch(List.copyOf(out), gap, next);
        } finally {
            lock.unlock();
        }
    }
}
