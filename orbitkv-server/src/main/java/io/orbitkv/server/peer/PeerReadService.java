package io.orbitkv.server.peer;

import com.google.protobuf.UnsafeByteOperations;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import io.orbitkv.core.log.UnexpectedErrors;
import io.orbitkv.core.peer.AuthorizeRequest;
import io.orbitkv.core.peer.AuthorizeResult;
import io.orbitkv.core.peer.NodeIncarnation;
import io.orbitkv.core.peer.PeerBoundary;
import io.orbitkv.core.peer.PeerSource;
import io.orbitkv.core.peer.TicketTable;
import io.orbitkv.server.cluster.NonBlockingService;
import io.orbitkv.server.peer.proto.AuthorizeCall;
import io.orbitkv.server.peer.proto.AuthorizeReply;
import io.orbitkv.server.peer.proto.DataEndpointCall;
import io.orbitkv.server.peer.proto.DataEndpointReply;
import io.orbitkv.server.peer.proto.Data;
import io.orbitkv.server.peer.proto.FetchReply;
import io.orbitkv.server.peer.proto.Grant;
import io.orbitkv.server.peer.proto.PayloadChunk;
import io.orbitkv.server.peer.proto.PeerReadGrpc;
import io.orbitkv.server.peer.proto.ReleaseCall;
import io.orbitkv.server.peer.proto.ReleaseReply;
import io.orbitkv.server.peer.proto.TransferCall;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;
import java.util.zip.CRC32C;

/**
 * The source side of peer reads as a gRPC service (hosted by the {@code ClusterRpcServer}, so
 * callers are authenticated before any method here runs). Maps the three RPCs onto the core
 * {@link PeerSource}; owns nothing but the streams in flight. {@code DataEndpoint} tells a
 * requester where this Manager's bulk data plane listens (docs/peer-data-plane.md); page bytes
 * then move there, and {@code Fetch} stays the path for requesters or sources without one.
 *
 * <p>Thread model: a {@link NonBlockingService}, so handlers run on the Netty event loop
 * ({@code directExecutor()}): nothing here blocks ({@link PeerSource#authorize} leases DRAM with a
 * CAS and stages SSD pages asynchronously; the ticket table's monitor is held for a few map
 * operations). gRPC serializes each call's callbacks (onReady, onCancel); a transfer's sender
 * runs only inside those callbacks or under the Fetch stream's monitor, so reading the pinned
 * bytes and ending the transfer never race.
 *
 * <p>Invariant: every transfer that began at the {@link TicketTable} ends there exactly once —
 * after the trailer, on cancellation, or on a send error — and no byte of the pinned image is
 * read after that end (the ticket may free the pin at once). Error boundary (layer
 * {@code transport}): an authorization that throws or fails is counted and answered NOT_SERVING;
 * a send that throws is counted and ends the stream INTERNAL.
 *
 * <p>Design note: chunks of {@link #CHUNK_BYTES} sent only while the stream {@code isReady()}:
 * HTTP/2 flow control then bounds what one transfer buffers to about one window plus one chunk,
 * instead of queueing a whole 2 MiB page per stream in Netty. A chunk is an
 * {@code UnsafeByteOperations.unsafeWrap} of the pinned slot, not a copy: gRPC serializes a
 * message into its own Netty buffers inside {@code onNext} ({@code ServerCallImpl.sendMessage} →
 * {@code MessageFramer.writePayload} drains the protobuf into the framer's buffers on the
 * calling thread), and the pin is only freed by {@code end()}, which runs after the last data
 * {@code onNext} returned and under the same monitor as every send. Even if a gRPC version
 * deferred that copy, the slot stays mapped (DRAM tier slots are never unmapped while the
 * Manager runs) and the trailer's CRC32C was computed from the bytes as pinned, so a reused
 * slot would be a checksum mismatch (a miss) at the requester, never a wrong hit. This saves
 * one 2 MiB copy per page (~0.1–0.2 ms at 10–20 GB/s). 1 MiB chunks: a 256 KiB page is one
 * message, a 2 MiB page two; the per-message cost (~10–30 µs of framing and callbacks) is
 * paid 4× less often than with 256 KiB chunks.
 *
 * <p>Fetch (authorize and stream in one call) releases the ticket itself when the stream ends;
 * the rule and why it is safe under lost replies are in docs/manager-core.md ("Peer read
 * tickets").
 */
public final class PeerReadService extends PeerReadGrpc.PeerReadImplBase implements NonBlockingService {

    /** Payload bytes per Data message. */
    public static final int CHUNK_BYTES = 1024 * 1024;

    private final PeerSource source;
    private final Optional<DataEndpoint> dataEndpoint;

    public PeerReadService(PeerSource source) {
        this(source, Optional.empty());
    }

    /**
     * A service that also answers {@code DataEndpoint} with {@code dataEndpoint}: a host (empty
     * for "the cluster endpoint's host") and port of this Manager's bulk data plane.
     */
    public PeerReadService(PeerSource source, Optional<DataEndpoint> dataEndpoint) {
        this.source = Objects.requireNonNull(source, "source");
        this.dataEndpoint = Objects.requireNonNull(dataEndpoint, "dataEndpoint");
    }

    /** Where this Manager's bulk data plane listens; {@code host} empty = the cluster endpoint's host. */
    public record DataEndpoint(String host, int port, int wireVersion) {
        public DataEndpoint {
            Objects.requireNonNull(host, "host");
            if (port < 1 || port > 65_535) throw new IllegalArgumentException("port: " + port);
        }
    }

    @Override
    public void dataEndpoint(DataEndpointCall request, StreamObserver<DataEndpointReply> out) {
        DataEndpointReply.Builder reply = DataEndpointReply.newBuilder().setIncarnation(source.self().incarnation());
        dataEndpoint.ifPresent(d -> reply.setHost(d.host()).setPort(d.port()).setWireVersion(d.wireVersion()));
        out.onNext(reply.build());
        out.onCompleted();
    }

    @Override
    public void authorize(AuthorizeCall request, StreamObserver<AuthorizeReply> out) {
        var decoded = PeerWire.decode(request);
        if (decoded.isEmpty()) {
            out.onNext(AuthorizeReply.newBuilder().setRejection(AuthorizeResult.Rejection.GENERATION_GONE.name()).build());
            out.onCompleted();
            return;
        }
        authorized("PeerReadService.authorize", decoded.get()).thenAccept(result -> {
            AuthorizeReply reply = switch (result) {
                case AuthorizeResult.Granted g -> AuthorizeReply.newBuilder().setGrant(Grant.newBuilder()
                        .setTicketId(g.ticketId()).setSourceIncarnation(g.sourceIncarnation())
                        .setLengthBytes(g.lengthBytes()).setWindowNanos(g.windowNanos())).build();
                case AuthorizeResult.Rejected r -> AuthorizeReply.newBuilder().setRejection(r.reason().name()).build();
            };
            out.onNext(reply);
            out.onCompleted();
        }).exceptionally(PeerReadService::answerFailed);
    }

    @Override
    public void transfer(TransferCall request, StreamObserver<PayloadChunk> out) {
        Optional<NodeIncarnation> requester = PeerWire.requester(request.getRequester());
        if (requester.isEmpty()) {
            refuse(out, TicketTable.TransferRefusal.WRONG_REQUESTER);
            return;
        }
        switch (source.beginTransfer(request.getTicketId(), requester.get())) {
            case TicketTable.BeginResult.Refused r -> refuse(out, r.reason());
            case TicketTable.BeginResult.Reading reading -> {
                ServerCallStreamObserver<PayloadChunk> call = (ServerCallStreamObserver<PayloadChunk>) out;
                Sender<PayloadChunk> sender = new Sender<>(call, c -> c, reading.ticketId(), reading.image().payload(),
                        Optional.empty());
                call.setOnCancelHandler(sender::end);
                call.setOnReadyHandler(sender);
                sender.run();
            }
        }
    }

    private static void refuse(StreamObserver<PayloadChunk> out, TicketTable.TransferRefusal reason) {
        out.onNext(PayloadChunk.newBuilder().setRefused(reason.name()).build());
        out.onCompleted();
    }

    @Override
    public void release(ReleaseCall request, StreamObserver<ReleaseReply> out) {
        String outcome = PeerWire.requester(request.getRequester())
                .map(r -> source.release(request.getTicketId(), r))
                .orElse(TicketTable.ReleaseOutcome.WRONG_REQUESTER).name();
        out.onNext(ReleaseReply.newBuilder().setOutcome(outcome).build());
        out.onCompleted();
    }

    /**
     * Authorize and stream in one call: answers the grant (or the rejection) first, then streams
     * under the ticket it just issued, and releases that ticket itself when the stream ends.
     */
    @Override
    public void fetch(AuthorizeCall request, StreamObserver<FetchReply> out) {
        ServerCallStreamObserver<FetchReply> call = (ServerCallStreamObserver<FetchReply>) out;
        FetchStream stream = new FetchStream(call);
        call.setOnCancelHandler(stream::cancel);
        call.setOnReadyHandler(stream::onReady);
        var decoded = PeerWire.decode(request);
        if (decoded.isEmpty()) {
            stream.reject(AuthorizeResult.Rejection.GENERATION_GONE);
            return;
        }
        NodeIncarnation requester = decoded.get().requester();
        authorized("PeerReadService.fetch", decoded.get()).thenAccept(result -> {
            switch (result) {
                case AuthorizeResult.Granted g -> stream.granted(g, requester);
                case AuthorizeResult.Rejected r -> stream.reject(r.reason());
            }
        }).exceptionally(PeerReadService::answerFailed);
    }

    /**
     * The source's answer to {@code request}: refusals are values; a throw or a failed future is
     * a bug, counted and answered NOT_SERVING (the requester reads elsewhere or recomputes).
     */
    private CompletableFuture<AuthorizeResult> authorized(String site, AuthorizeRequest request) {
        return PeerBoundary.call(UnexpectedErrors.Layer.TRANSPORT, site, "a NOT_SERVING refusal",
                new AuthorizeResult.Rejected(AuthorizeResult.Rejection.NOT_SERVING), () -> source.authorize(request));
    }

    /** Answering a call threw (its stream already closed, or a bug): counted; a ticket it held ends with its window. */
    private static Void answerFailed(Throwable failure) {
        Throwable cause = PeerBoundary.cause(failure);
        // a StatusRuntimeException is gRPC saying the call already ended (the requester went away): expected
        if (!(cause instanceof StatusRuntimeException)) {
            UnexpectedErrors.record(UnexpectedErrors.Layer.TRANSPORT, "PeerReadService.answer",
                    "an unanswered call (the requester's deadline)", cause);
        }
        return null;
    }

    /**
     * One Fetch call's state. The gRPC callbacks (ready, cancel) and the authorization's
     * completion (possibly on the SSD worker) meet under this object's monitor; lock order is
     * always FetchStream then Sender.
     */
    private final class FetchStream {
        private final ServerCallStreamObserver<FetchReply> call;
        // @GuardedBy("this")
        private boolean cancelled;
        // @GuardedBy("this")
        private Sender<FetchReply> sender;

        FetchStream(ServerCallStreamObserver<FetchReply> call) {
            this.call = call;
        }

        synchronized void reject(AuthorizeResult.Rejection reason) {
            if (cancelled) return;
            call.onNext(FetchReply.newBuilder().setAuthorized(AuthorizeReply.newBuilder().setRejection(reason.name())).build());
            call.onCompleted();
        }

        synchronized void granted(AuthorizeResult.Granted g, NodeIncarnation requester) {
            if (cancelled) {
                source.release(g.ticketId(), requester);
                return;
            }
            call.onNext(FetchReply.newBuilder().setAuthorized(AuthorizeReply.newBuilder().setGrant(Grant.newBuilder()
                    .setTicketId(g.ticketId()).setSourceIncarnation(g.sourceIncarnation())
                    .setLengthBytes(g.lengthBytes()).setWindowNanos(g.windowNanos()))).build());
            switch (source.beginTransfer(g.ticketId(), requester)) {
                case TicketTable.BeginResult.Refused r -> {
                    source.release(g.ticketId(), requester);
                    call.onNext(FetchReply.newBuilder().setChunk(PayloadChunk.newBuilder().setRefused(r.reason().name())).build());
                    call.onCompleted();
                }
                case TicketTable.BeginResult.Reading reading -> {
                    sender = new Sender<>(call, c -> FetchReply.newBuilder().setChunk(c).build(),
                            reading.ticketId(), reading.image().payload(), Optional.of(requester));
                    sender.run();
                }
            }
        }

        synchronized void onReady() {
            if (sender != null) sender.run();
        }

        synchronized void cancel() {
            cancelled = true;
            if (sender != null) sender.end();
        }
    }

    /**
     * Streams one pinned payload while the call is ready; ends the transfer exactly once, and,
     * for a Fetch ({@code releaseFor} present), releases the ticket right after.
     */
    private final class Sender<T> implements Runnable {
        private final ServerCallStreamObserver<T> call;
        private final Function<PayloadChunk, T> wrap;
        private final long ticketId;
        private final MemorySegment payload;
        private final Optional<NodeIncarnation> releaseFor;
        private final CRC32C crc = new CRC32C();
        private long offset;
        private boolean ended;

        Sender(ServerCallStreamObserver<T> call, Function<PayloadChunk, T> wrap, long ticketId, MemorySegment payload,
               Optional<NodeIncarnation> releaseFor) {
            this.call = call;
            this.wrap = wrap;
            this.ticketId = ticketId;
            this.payload = payload;
            this.releaseFor = releaseFor;
        }

        @Override
        public synchronized void run() {
            try {
                while (!ended && call.isReady()) {
                    if (offset == payload.byteSize()) {
                        int checksum = (int) crc.getValue();
                        end();
                        call.onNext(wrap.apply(PayloadChunk.newBuilder()
                                .setTrailer(io.orbitkv.server.peer.proto.Trailer.newBuilder().setCrc32C(checksum)).build()));
                        call.onCompleted();
                        return;
                    }
                    int n = (int) Math.min(CHUNK_BYTES, payload.byteSize() - offset);
                    ByteBuffer piece = payload.asSlice(offset, n).asByteBuffer();
                    crc.update(piece.duplicate());
                    call.onNext(wrap.apply(PayloadChunk.newBuilder()
                            .setData(Data.newBuilder().setOffset(offset).setBytes(UnsafeByteOperations.unsafeWrap(piece))).build()));
                    offset += n;
                }
            } catch (StatusRuntimeException e) {
                end(); // the call already ended (the requester went away): nothing more to send on it
            } catch (RuntimeException e) {
                // a cancelled call drops messages (its cancel handler is set) rather than throw: a bug
                UnexpectedErrors.record(UnexpectedErrors.Layer.TRANSPORT, "PeerReadService.send",
                        "a failed stream (INTERNAL: a miss at the requester)", e);
                end();
                call.onError(io.grpc.Status.INTERNAL.withDescription("peer transfer failed").asRuntimeException());
            }
        }

        synchronized void end() {
            if (ended) return;
            ended = true;
            source.endTransfer(ticketId);
            releaseFor.ifPresent(requester -> source.release(ticketId, requester));
        }
    }
}
