package io.orbitkv.core.peer;

import io.orbitkv.core.log.UnexpectedErrors.Layer;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * The requester's bounded table of ticket releases that have not been acknowledged yet, retried
 * with exponential backoff through control outages.
 *
 * <p>Owns at most {@code pendingReleaseEntries} pending releases. A release that fails
 * {@code maxAttempts} times, or that finds the table full, is dropped and counted: the source's
 * ticket window is the backstop that frees the pin anyway, so giving up costs pinned source
 * memory for at most one window, never correctness.
 *
 * <p>Thread model: thread-safe (one monitor). Sending happens outside the monitor; acks complete
 * on the transport's threads. Time comes in as {@code nowNanos}; {@link #onTick} is driven by
 * the owner's housekeeping loop.
 *
 * <p>Design note: backoff starts at {@code initialBackoffNanos} and doubles up to
 * {@code maxBackoffNanos}; with 50 ms → 2 s and 8 attempts a release keeps trying for ~6 s,
 * which rides out an etcd or network blip but stays inside a 30 s ticket window, so a release
 * that finally lands still frees the pin earlier than expiry would.
 */
public final class ReleaseRetrier {

    /** Outcome of {@link #submit}. */
    public enum SubmitResult { SENT, TABLE_FULL }

    private record Key(PeerEndpoint source, long ticketId) {}

    private static final class Pending {
        final NodeIncarnation requester;
        int attempts;
        long nextAttemptNanos;
        boolean inFlight;

        Pending(NodeIncarnation requester) {
            this.requester = requester;
        }
    }

    private final PayloadTransport transport;
    private final int pendingReleaseEntries;
    private final int maxAttempts;
    private final long initialBackoffNanos;
    private final long maxBackoffNanos;
    // @GuardedBy("this")
    private final Map<Key, Pending> pending = new LinkedHashMap<>();
    // @GuardedBy("this")
    private long acked;
    // @GuardedBy("this")
    private long abandoned;

    public ReleaseRetrier(PayloadTransport transport, int pendingReleaseEntries, int maxAttempts,
                          long initialBackoffNanos, long maxBackoffNanos) {
        this.transport = Objects.requireNonNull(transport, "transport");
        if (pendingReleaseEntries <= 0) throw new IllegalArgumentException("pendingReleaseEntries: " + pendingReleaseEntries);
        if (maxAttempts <= 0) throw new IllegalArgumentException("maxAttempts: " + maxAttempts);
        if (initialBackoffNanos <= 0 || maxBackoffNanos < initialBackoffNanos) {
            throw new IllegalArgumentException("backoff " + initialBackoffNanos + ".." + maxBackoffNanos);
        }
        this.pendingReleaseEntries = pendingReleaseEntries;
        this.maxAttempts = maxAttempts;
        this.initialBackoffNanos = initialBackoffNanos;
        this.maxBackoffNanos = maxBackoffNanos;
    }

    /** Sends a release now and keeps retrying it until acknowledged or abandoned. */
    public SubmitResult submit(PeerEndpoint source, long ticketId, NodeIncarnation requester, long nowNanos) {
        Key key = new Key(source, ticketId);
        synchronized (this) {
            if (pending.containsKey(key)) return SubmitResult.SENT;
            if (pending.size() >= pendingReleaseEntries) {
                abandoned++;
                return SubmitResult.TABLE_FULL;
            }
            Pending p = new Pending(requester);
            p.inFlight = true;
            p.attempts = 1;
            pending.put(key, p);
        }
        send(key, requester, nowNanos);
        return SubmitResult.SENT;
    }

    /** Resends every release whose backoff has passed; returns how many were sent. */
    public int onTick(long nowNanos) {
        List<Map.Entry<Key, NodeIncarnation>> due = new ArrayList<>();
        synchronized (this) {
            for (Map.Entry<Key, Pending> e : pending.entrySet()) {
                Pending p = e.getValue();
                if (!p.inFlight && nowNanos - p.nextAttemptNanos >= 0) {
                    p.inFlight = true;
                    p.attempts++;
                    due.add(Map.entry(e.getKey(), p.requester));
                }
            }
        }
        for (Map.Entry<Key, NodeIncarnation> d : due) send(d.getKey(), d.getValue(), nowNanos);
        return due.size();
    }

    private void send(Key key, NodeIncarnation requester, long sentAtNanos) {
        PeerBoundary.call(Layer.PEER, "ReleaseRetrier.send", "a failed release (retried)", PayloadTransport.ReleaseAck.FAILED,
                        () -> transport.release(key.source(), key.ticketId(), requester))
                .thenAccept(ack -> onAck(key, ack, sentAtNanos));
    }

    private synchronized void onAck(Key key, PayloadTransport.ReleaseAck ack, long sentAtNanos) {
        Pending p = pending.get(key);
        if (p == null) return;
        switch (ack) {
            case ACKED -> {
                pending.remove(key);
                acked++;
            }
            case FAILED -> {
                if (p.attempts >= maxAttempts) {
                    pending.remove(key);
                    abandoned++;
                } else {
                    p.inFlight = false;
                    long backoff = Math.min(maxBackoffNanos, initialBackoffNanos << Math.min(30, p.attempts - 1));
                    p.nextAttemptNanos = sentAtNanos + backoff;
                }
            }
        }
    }

    /** Releases not yet acknowledged nor abandoned. */
    public synchronized int pending() {
        return pending.size();
    }

    public synchronized long ackedTotal() {
        return acked;
    }

    /** Releases given up on (attempts exhausted or table full); the source's window frees those tickets. */
    public synchronized long abandonedTotal() {
        return abandoned;
    }
}
