package io.orbitkv.core.query;

import io.orbitkv.state.protocol.Reply;

/**
 * What a {@link QueryOperation} needs from the session that owns it: the lock that confines it,
 * a way to tell the client, and a way to say it is gone. Implemented by the engine session.
 *
 * <p>Thread model: {@link #lock()} may be called from any thread (I/O completions and timers
 * take it before they touch the operation); {@link #emit}, {@link #ended} and
 * {@link #leaseTickets} are called with that lock held.
 */
public interface SessionCallback {

    /** The monitor that confines the session and all its operations. */
    Object lock();

    /** Sends an asynchronous event to the client (best effort). */
    void emit(Reply.Completion event);

    /** The operation has drained and holds nothing: forget it. */
    void ended(QueryOperation operation);

    /**
     * An operation took ({@code delta > 0}) or gave back ({@code delta < 0}) entries of the global
     * lease table; the session counts them for its namespace (STATS {@code leases}). Nothing by default.
     */
    default void leaseTickets(long delta) {
    }
}
