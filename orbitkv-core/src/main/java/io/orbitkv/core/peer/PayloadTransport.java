package io.orbitkv.core.peer;

import java.util.concurrent.CompletableFuture;

/**
 * Moves control messages and payload bytes between Managers for peer reads. The gRPC/TCP
 * implementation lives in the server module; an RDMA engine would implement the same three calls
 * (authorize and release stay small control RPCs; {@link #transfer} becomes a one-sided read into
 * the registered DRAM slot).
 *
 * <p>Futures never complete exceptionally for network trouble: an unreachable source is
 * {@link AuthorizeResult.Rejection#UNREACHABLE}, a broken stream is {@link TransferEnd#BROKEN},
 * a lost release is {@link ReleaseAck#FAILED}. Each call carries the transport's own deadline.
 */
public interface PayloadTransport {

    /** How a transfer stream ended. */
    enum TransferEnd {
        /** The source sent everything and its trailer. The sink decides whether the bytes are good. */
        COMPLETED,
        /** The source refused to start (ticket unknown, expired, revoked). */
        REFUSED,
        /** The stream failed, timed out or was cancelled before the trailer. */
        BROKEN
    }

    /** Whether a release reached the source. */
    enum ReleaseAck { ACKED, FAILED }

    CompletableFuture<AuthorizeResult> authorize(PeerEndpoint source, AuthorizeRequest request);

    /** Streams the payload of {@code ticket} into {@code sink}, in order, then the trailer. */
    CompletableFuture<TransferEnd> transfer(PeerEndpoint source, AuthorizeResult.Granted ticket,
                                            NodeIncarnation requester, PayloadSink sink);

    CompletableFuture<ReleaseAck> release(PeerEndpoint source, long ticketId, NodeIncarnation requester);
}
