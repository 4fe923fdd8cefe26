package io.orbitkv.core.engine;

import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;

/**
 * The Manager's side of one engine-channel connection: the seam between the transport (which
 * owns the socket, framing and decoding, in {@code orbitkv-server}) and the Manager's logic
 * (sessions, operations, leases, in {@code orbitkv-core}).
 *
 * <p>Thread model: the transport calls {@link #handle} for one request at a time, in the order
 * the requests arrived on the connection (so replies keep request order, protocol §9.3); it may
 * block the caller (e.g. REGISTER waits for a fenced incarnation to drain), so transports run
 * each connection on its own (virtual) thread. {@link #close} is called exactly once, after the
 * last {@code handle} returned, when the connection ends for any reason.
 */
public interface ChannelSession {

    /**
     * Handles one decoded request and returns its one reply: the typed reply or
     * {@link Reply.Error}. Never throws for anything a client can send; an exception here is a
     * bug, which the transport answers with ERROR INTERNAL while the Manager keeps serving.
     */
    Reply handle(Request request);

    /**
     * The connection is gone: cancel every operation as by CANCEL, abort unsealed reservations,
     * unregister regions, each after its submitted I/O has drained (protocol §9.6). Does not
     * wait for the drain.
     */
    void close();
}
