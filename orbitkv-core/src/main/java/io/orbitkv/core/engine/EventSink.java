package io.orbitkv.core.engine;

import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.Reply;

/**
 * Where a {@link ChannelSession} sends what is not a reply: asynchronous COMPLETION events and
 * the fencing of its connection. Implemented by the transport; thread-safe (called from I/O
 * completion threads while the connection thread writes replies).
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
