package io.orbitkv.core.query;

import io.orbitkv.core.storage.TieredStore;
import io.orbitkv.core.transfer.RestoreCopier;
import io.orbitkv.state.protocol.Reply;

import java.util.concurrent.Executor;

/**
 * What a {@link QueryOperation} needs from the session that owns it. Implemented by the engine
 * session; every method is called with the session's lock held, except {@link #lock()} and
 * {@link #callbacks()}.
 */
public interface OperationHost {

    /** The monitor that confines the session and all its operations. */
    Object lock();

    /** Runs I/O completions (stagings, copies) off the I/O threads, which must not take session locks. */
    Executor callbacks();

    TieredStore store();

    QueryPlanner planner();

    /** The global lease table (unit: leases). */
    Budget leases();

    /** Bytes being staged from SSD into DRAM (unit: bytes). */
    Budget stagingBytes();

    /** The bounded executor of restore copies. */
    RestoreCopier copier();

    /** Stagings one operation submits at once. */
    int stagesPerOperation();

    /** Re-selections after staging failures before an operation settles as a miss. */
    int maxReplans();

    /** The longest a QUERY waits for peers, whatever it asks (nanoseconds; 0 never waits). */
    long peerWaitMaxNanos();

    /**
     * Runs {@code task} once after {@code delayNanos} on a timer thread, which must hand it to
     * {@link #callbacks()} before taking any lock; returns what cancels it (idempotent).
     */
    Runnable schedule(Runnable task, long delayNanos);

    /** Sends an asynchronous event to the client (best effort). */
    void emit(Reply.Completion event);

    /** The operation has drained and holds nothing: forget it. */
    void ended(QueryOperation operation);

    /** Counts a settled query (or a first PENDING answer). */
    void countQuery(QueryOutcome outcome, int pagesLeased);

    /** Counts bytes copied into engine regions. */
    void countRestoreBytes(long bytes);

    /** Counts a QUERY's peer wait when it ends. */
    void countPeerWait(PeerWaitOutcome outcome);

    /** How a peer wait ended ({@code orbitkv.manager.peer.waits}, tag {@code outcome}). */
    enum PeerWaitOutcome {
        /** Settled before the bound: the lookup answered and every fetch landed (hit or not). */
        SETTLED,
        /** The bound passed first: settled with what local tiers held. */
        EXPIRED,
        /** Cancelled, released or replaced before it settled. */
        STOPPED
    }

    /** How a query answer is counted ({@code orbitkv.manager.queries}, tag {@code outcome}). */
    enum QueryOutcome { HIT, MISS, PENDING }
}
