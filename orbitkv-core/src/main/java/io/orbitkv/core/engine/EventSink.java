package io.orbitkv.core.engine;

import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.Reply;

/**
 * Where a {@link ChannelSession} sends what is not a reply: asynchronous COMPLETION events and
 * the fencing of its connection. Implemented by the transport; thread-safe (called from I/O
 * completion threads while the connection thread writes replies).
 *
 * <p>Ordering (protocol §9.3): the Manager never calls {@link #complete} about work while the
 * {@link ChannelSession#handle} that started it is still running (a staging that finishes first
 * turns that reply FINAL instead), but it may call it as soon as that {@code handle} returned.
 * So the transport must put a {@code handle}'s reply on the connection's outbound path before
 * anything queued by {@code complete} after that return, e.g. by enqueueing replies and events
 * on one queue and enqueueing the reply under the same lock {@code complete} takes.
 *
 * <p>One exception: a RESTORE small enough to be copied inline (ManagerBounds
 * {@code restoreInlineBytes}) is copied on the thread calling {@code handle}, and its
 * RESTORE_DONE is passed to {@link #complete} on that thread before {@code handle} returns the
 * RESTORE_ACCEPTED. The transport must write that event after the reply, as it writes any event
 * queued while a request is in hand after that request's reply.
 */
public interface EventSink {

    /**
     * Queues a COMPLETION frame (request id 0) to the connection. Returns false when the
     * connection is gone or its bounded outbound queue is full; the session must not rely on
     * delivery (clients can always QUERY_POLL).
     */
    boolean complete(Reply.Completion event);

    /**
     * Sends ERROR {@code code} (request id 0) and closes the connection, e.g. when a higher
     * epoch of the same instance registers (STALE_EPOCH). The transport then calls
     * {@link ChannelSession#close()}.
     */
    void fence(ErrorCode code, String message);
}
