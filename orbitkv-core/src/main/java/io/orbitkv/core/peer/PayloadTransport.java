package io.orbitkv.core.peer;

import io.orbitkv.core.log.UnexpectedErrors.Layer;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * Moves control messages and payload bytes between Managers for peer reads. The gRPC/TCP
 * implementation lives in the server module; an RDMA engine would implement the same three calls
 * (authorize and release stay small control RPCs; {@link #transfer} becomes a one-sided read into
 * the registered DRAM slot).
 *
 * <p>Calls never throw and futures never complete exceptionally for network trouble, a closed
 * transport included: an unreachable source is {@link AuthorizeResult.Rejection#UNREACHABLE}, a
 * broken stream is {@link TransferEnd#BROKEN}, a lost release is {@link ReleaseAck#FAILED}. Each
 * call carries the transport's own deadline. A throw or an exceptional future is a bug: callers
 * record it ({@link PeerBoundary}) and answer the failure value. A fetch's future completes (either
 * way) only after the transport stopped calling the sink.
 *
 * <p>{@link #fetch} is the read path: authorize and stream in one operation. Its default runs the
 * three calls in sequence and leaves the release to the caller ({@link FetchOutcome#releaseOwed()});
 * a transport that can do better (gRPC: one server-streaming call whose source frees the ticket
 * when the stream ends) overrides it and owes no release.
 *
 * <p>{@link #fetchBatch} reads several pages of one source: a bulk transport sends one request
 * for all of them (docs/peer-data-plane.md); the default is one {@link #fetch} per page.
 * {@link #onMemberLeft} lets a transport end at once what it has in flight to a member that left
 * the view, instead of waiting for its deadline.
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

    /** Receives a {@link #fetch}: first the grant, then (if it accepted) the payload. */
    interface FetchSink {
        /**
         * The source granted {@code grant}. Returns the sink for its payload, or empty to take
         * nothing (already resident, no room): the transport then stops the stream.
         */
        Optional<PayloadSink> onGrant(AuthorizeResult.Granted grant);
    }

    /** How a {@link #fetch} ended. */
    sealed interface FetchOutcome {
        /** Whether the caller must still release the ticket at the source (through the retrier). */
        boolean releaseOwed();

        /** Refused before any byte (or the source was unreachable). */
        record Rejected(AuthorizeResult.Rejection reason) implements FetchOutcome {
            @Override
            public boolean releaseOwed() {
                return false;
            }
        }

        /** Granted, but the sink took nothing. */
        record Declined(AuthorizeResult.Granted grant, boolean releaseOwed) implements FetchOutcome {}

        /** Granted and streamed into the sink; {@code end} says how the stream ended. */
        record Streamed(AuthorizeResult.Granted grant, TransferEnd end, boolean releaseOwed) implements FetchOutcome {}
    }

    /**
     * Authorizes {@code request} and streams the granted payload into the sink {@code receiver}
     * returns. Default: {@link #authorize} then {@link #transfer}; the release stays owed.
     */
    default CompletableFuture<FetchOutcome> fetch(PeerEndpoint source, AuthorizeRequest request, FetchSink receiver) {
        return PeerBoundary.call(Layer.PEER, "PayloadTransport.authorize", "an unreachable source",
                        new AuthorizeResult.Rejected(AuthorizeResult.Rejection.UNREACHABLE), () -> authorize(source, request))
                .thenCompose(answer -> switch (answer) {
                    case AuthorizeResult.Rejected r -> CompletableFuture.<FetchOutcome>completedFuture(
                            new FetchOutcome.Rejected(r.reason()));
                    case AuthorizeResult.Granted g -> receiver.onGrant(g)
                            .map(sink -> PeerBoundary.call(Layer.PEER, "PayloadTransport.transfer", "a broken stream",
                                            TransferEnd.BROKEN, () -> transfer(source, g, request.requester(), sink))
                                    .<FetchOutcome>thenApply(end -> new FetchOutcome.Streamed(g, end, true)))
                            .orElseGet(() -> CompletableFuture.completedFuture(new FetchOutcome.Declined(g, true)));
                });
    }

    /**
     * Fetches every page of {@code requests} from {@code source} (all requests name the same
     * source incarnation), each into the sink its receiver returns: one future per page, in the
     * order of {@code requests}, each completed as {@link #fetch} would complete it. A page may
     * complete before the others (its future does not wait for the batch). Default: one
     * {@link #fetch} per page.
     */
    default List<CompletableFuture<FetchOutcome>> fetchBatch(PeerEndpoint source, List<AuthorizeRequest> requests,
                                                             List<? extends FetchSink> receivers) {
        if (requests.size() != receivers.size()) {
            throw new IllegalArgumentException(requests.size() + " requests, " + receivers.size() + " receivers");
        }
        List<CompletableFuture<FetchOutcome>> out = new ArrayList<>(requests.size());
        for (int i = 0; i < requests.size(); i++) out.add(fetch(source, requests.get(i), receivers.get(i)));
        return out;
    }

    /**
     * {@code member} left the membership view (or was replaced by a new incarnation): a transport
     * that keeps connections to it closes them, so every fetch in flight to it ends now as a
     * refusal or a broken stream (a miss), never at its deadline. Called on the Manager's tick
     * thread; must not block. Default: nothing to close.
     */
    default void onMemberLeft(NodeIncarnation member) {
    }

    CompletableFuture<AuthorizeResult> authorize(PeerEndpoint source, AuthorizeRequest request);

    /** Streams the payload of {@code ticket} into {@code sink}, in order, then the trailer. */
    CompletableFuture<TransferEnd> transfer(PeerEndpoint source, AuthorizeResult.Granted ticket,
                                            NodeIncarnation requester, PayloadSink sink);

    CompletableFuture<ReleaseAck> release(PeerEndpoint source, long ticketId, NodeIncarnation requester);
}
