package io.orbitkv.server.peer;

import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import io.grpc.stub.StreamObserver;
import io.orbitkv.core.peer.AuthorizeRequest;
import io.orbitkv.core.peer.AuthorizeResult;
import io.orbitkv.core.peer.NodeIncarnation;
import io.orbitkv.core.peer.PayloadSink;
import io.orbitkv.core.peer.PayloadTransport;
import io.orbitkv.core.peer.PeerEndpoint;
import io.orbitkv.server.cluster.ClusterChannels;
import io.orbitkv.server.peer.proto.AuthorizeCall;
import io.orbitkv.server.peer.proto.AuthorizeReply;
import io.orbitkv.server.peer.proto.FetchReply;
import io.orbitkv.server.peer.proto.PayloadChunk;
import io.orbitkv.server.peer.proto.PeerReadGrpc;
import io.orbitkv.server.peer.proto.ReleaseCall;
import io.orbitkv.server.peer.proto.ReleaseReply;
import io.orbitkv.server.peer.proto.TransferCall;

import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * {@link PayloadTransport} over gRPC/TCP: the requester's client of {@link PeerReadService},
 * using the authenticated per-peer channels of {@link ClusterChannels}.
 *
 * <p>Borrows the channels; owns nothing. Thread model: thread-safe; the sink is called on the
 * channel's executor, one message at a time, in order. Every call has a deadline, so a source
 * killed mid-transfer ends the stream as {@link TransferEnd#BROKEN} within
 * {@code transferDeadline} at worst (normally at once, when the TCP connection resets).
 *
 * <p>Design note: network failure is turned into values here (UNREACHABLE, BROKEN, FAILED), the
 * one boundary where a {@code StatusRuntimeException} is seen, so the core workflow has no
 * exceptional path and every failure is a miss; closed channels (the Manager stopping) are
 * answered the same, so a throw reaching the caller's boundary is a bug.
 */
public final class GrpcPayloadTransport implements PayloadTransport {

    private final ClusterChannels channels;
    private final Duration controlDeadline;
    private final Duration transferDeadline;

    public GrpcPayloadTransport(ClusterChannels channels, Duration controlDeadline, Duration transferDeadline) {
        this.channels = Objects.requireNonNull(channels, "channels");
        this.controlDeadline = Objects.requireNonNull(controlDeadline, "controlDeadline");
        this.transferDeadline = Objects.requireNonNull(transferDeadline, "transferDeadline");
    }

    /** The stub for {@code source}; empty once the channels closed (the Manager is stopping: the peer is unreachable). */
    private Optional<PeerReadGrpc.PeerReadStub> stub(PeerEndpoint source, Duration deadline) {
        return channels.tryChannel(source.address())
                .map(c -> PeerReadGrpc.newStub(c).withDeadlineAfter(deadline.toNanos(), TimeUnit.NANOSECONDS));
    }

    @Override
    public CompletableFuture<AuthorizeResult> authorize(PeerEndpoint source, AuthorizeRequest request) {
        Optional<PeerReadGrpc.PeerReadStub> stub = stub(source, controlDeadline);
        if (stub.isEmpty()) return CompletableFuture.completedFuture(new AuthorizeResult.Rejected(AuthorizeResult.Rejection.UNREACHABLE));
        CompletableFuture<AuthorizeResult> result = new CompletableFuture<>();
        stub.get().authorize(PeerWire.encode(request), new Unary<>(result,
                new AuthorizeResult.Rejected(AuthorizeResult.Rejection.UNREACHABLE)) {
            @Override
            AuthorizeResult convert(AuthorizeReply reply) {
                return authorizeResult(reply, request);
            }
        });
        return result;
    }

    private static AuthorizeResult authorizeResult(AuthorizeReply reply, AuthorizeRequest request) {
        return switch (reply.getResultCase()) {
            case GRANT -> reply.getGrant().getLengthBytes() <= 0 || reply.getGrant().getTicketId() <= 0
                    ? new AuthorizeResult.Rejected(AuthorizeResult.Rejection.UNREACHABLE)
                    : new AuthorizeResult.Granted(reply.getGrant().getTicketId(), reply.getGrant().getSourceIncarnation(),
                            request.key(), reply.getGrant().getLengthBytes(), reply.getGrant().getWindowNanos());
            case REJECTION -> new AuthorizeResult.Rejected(rejection(reply.getRejection()));
            case RESULT_NOT_SET -> new AuthorizeResult.Rejected(AuthorizeResult.Rejection.UNREACHABLE);
        };
    }

    /**
     * One {@code Fetch} stream: the grant (or rejection), then the payload. The source frees the
     * ticket when the stream ends, so no release is owed; declining the grant cancels the stream.
     */
    @Override
    public CompletableFuture<FetchOutcome> fetch(PeerEndpoint source, AuthorizeRequest request, FetchSink receiver) {
        Optional<PeerReadGrpc.PeerReadStub> stub = stub(source, transferDeadline);
        if (stub.isEmpty()) return CompletableFuture.completedFuture(new FetchOutcome.Rejected(AuthorizeResult.Rejection.UNREACHABLE));
        CompletableFuture<FetchOutcome> done = new CompletableFuture<>();
        stub.get().fetch(PeerWire.encode(request), new ClientResponseObserver<AuthorizeCall, FetchReply>() {
            private ClientCallStreamObserver<AuthorizeCall> stream;
            private FetchOutcome rejected;
            private AuthorizeResult.Granted grant;
            private PayloadSink sink;
            private boolean declined;
            private boolean cancelled;
            private boolean trailer;
            private boolean refused;

            @Override
            public void beforeStart(ClientCallStreamObserver<AuthorizeCall> requestStream) {
                this.stream = requestStream;
            }

            @Override
            public void onNext(FetchReply reply) {
                if (cancelled) return; // messages already buffered when we cancelled: not ours any more
                switch (reply.getBodyCase()) {
                    case AUTHORIZED -> {
                        if (grant != null || rejected != null) {
                            cancel("second authorization");
                            return;
                        }
                        switch (authorizeResult(reply.getAuthorized(), request)) {
                            case AuthorizeResult.Rejected r -> rejected = new FetchOutcome.Rejected(r.reason());
                            case AuthorizeResult.Granted g -> {
                                grant = g;
                                receiver.onGrant(g).ifPresentOrElse(s -> sink = s, () -> {
                                    declined = true;
                                    cancel("grant declined by the requester");
                                });
                            }
                        }
                    }
                    case CHUNK -> {
                        if (sink == null) {
                            cancel("payload before grant");
                            return;
                        }
                        PayloadChunk chunk = reply.getChunk();
                        switch (chunk.getBodyCase()) {
                            case DATA -> {
                                if (!sink.onChunk(chunk.getData().getOffset(), chunk.getData().getBytes().asReadOnlyByteBuffer())) {
                                    cancel("payload rejected by the requester");
                                }
                            }
                            case TRAILER -> {
                                trailer = true;
                                sink.onTrailer(chunk.getTrailer().getCrc32C());
                            }
                            case REFUSED -> refused = true;
                            case BODY_NOT_SET -> cancel("empty chunk");
                        }
                    }
                    case BODY_NOT_SET -> cancel("empty reply");
                }
            }

            private void cancel(String why) {
                cancelled = true;
                stream.cancel(why, null);
            }

            @Override
            public void onError(Throwable t) {
                done.complete(outcome(TransferEnd.BROKEN));
            }

            @Override
            public void onCompleted() {
                done.complete(outcome(refused ? TransferEnd.REFUSED : trailer ? TransferEnd.COMPLETED : TransferEnd.BROKEN));
            }

            private FetchOutcome outcome(TransferEnd end) {
                if (rejected != null) return rejected;
                if (grant == null) return new FetchOutcome.Rejected(AuthorizeResult.Rejection.UNREACHABLE);
                if (declined) return new FetchOutcome.Declined(grant, false);
                return new FetchOutcome.Streamed(grant, cancelled ? TransferEnd.BROKEN : end, false);
            }
        });
        return done;
    }

    private static AuthorizeResult.Rejection rejection(String name) {
        for (AuthorizeResult.Rejection r : AuthorizeResult.Rejection.values()) {
            if (r.name().equals(name)) return r;
        }
        return AuthorizeResult.Rejection.UNREACHABLE;
    }

    @Override
    public CompletableFuture<TransferEnd> transfer(PeerEndpoint source, AuthorizeResult.Granted ticket,
                                                   NodeIncarnation requester, PayloadSink sink) {
        Optional<PeerReadGrpc.PeerReadStub> stub = stub(source, transferDeadline);
        if (stub.isEmpty()) return CompletableFuture.completedFuture(TransferEnd.BROKEN);
        CompletableFuture<TransferEnd> end = new CompletableFuture<>();
        TransferCall call = TransferCall.newBuilder().setRequester(PeerWire.requester(requester))
                .setTicketId(ticket.ticketId()).build();
        stub.get().transfer(call, new ClientResponseObserver<TransferCall, PayloadChunk>() {
            private ClientCallStreamObserver<TransferCall> stream;
            private boolean trailer;
            private boolean refused;
            private boolean cancelled;

            @Override
            public void beforeStart(ClientCallStreamObserver<TransferCall> requestStream) {
                this.stream = requestStream;
            }

            @Override
            public void onNext(PayloadChunk chunk) {
                if (cancelled) return; // messages already buffered when we cancelled: not ours any more
                switch (chunk.getBodyCase()) {
                    case DATA -> {
                        if (!sink.onChunk(chunk.getData().getOffset(), chunk.getData().getBytes().asReadOnlyByteBuffer())) {
                            cancel("payload rejected by the requester");
                        }
                    }
                    case TRAILER -> {
                        trailer = true;
                        sink.onTrailer(chunk.getTrailer().getCrc32C());
                    }
                    case REFUSED -> refused = true;
                    case BODY_NOT_SET -> cancel("empty chunk");
                }
            }

            private void cancel(String why) {
                cancelled = true;
                stream.cancel(why, null);
            }

            @Override
            public void onError(Throwable t) {
                end.complete(TransferEnd.BROKEN);
            }

            @Override
            public void onCompleted() {
                end.complete(cancelled ? TransferEnd.BROKEN
                        : refused ? TransferEnd.REFUSED : trailer ? TransferEnd.COMPLETED : TransferEnd.BROKEN);
            }
        });
        return end;
    }

    @Override
    public CompletableFuture<ReleaseAck> release(PeerEndpoint source, long ticketId, NodeIncarnation requester) {
        Optional<PeerReadGrpc.PeerReadStub> stub = stub(source, controlDeadline);
        if (stub.isEmpty()) return CompletableFuture.completedFuture(ReleaseAck.FAILED);
        CompletableFuture<ReleaseAck> result = new CompletableFuture<>();
        ReleaseCall call = ReleaseCall.newBuilder().setRequester(PeerWire.requester(requester)).setTicketId(ticketId).build();
        stub.get().release(call, new Unary<>(result, ReleaseAck.FAILED) {
            @Override
            ReleaseAck convert(ReleaseReply reply) {
                return ReleaseAck.ACKED;
            }
        });
        return result;
    }

    /** A unary call's observer that completes {@code result} with a value, or {@code onFailure}. */
    private abstract static class Unary<R, T> implements StreamObserver<R> {
        private final CompletableFuture<T> result;
        private final T onFailure;

        Unary(CompletableFuture<T> result, T onFailure) {
            this.result = result;
            this.onFailure = onFailure;
        }

        abstract T convert(R reply);

        @Override
        public void onNext(R reply) {
            result.complete(convert(reply));
        }

        @Override
        public void onError(Throwable t) {
            result.complete(onFailure);
        }

        @Override
        public void onCompleted() {
            result.complete(onFailure);
        }
    }
}
