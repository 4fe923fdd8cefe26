package io.orbitkv.server.cluster;

import com.google.common.util.concurrent.FutureCallback;
import com.google.common.util.concurrent.Futures;
import com.google.common.util.concurrent.ListenableFuture;
import com.google.common.util.concurrent.MoreExecutors;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.orbitkv.core.catalog.CatalogTransport;
import io.orbitkv.core.catalog.KeyLocation;
import io.orbitkv.core.catalog.Member;
import io.orbitkv.core.catalog.PushBatch;
import io.orbitkv.core.log.UnexpectedErrors;
import io.orbitkv.server.cluster.proto.CatalogGrpc;
import io.orbitkv.server.cluster.proto.LookupReply;
import io.orbitkv.server.cluster.proto.LookupRequest;
import io.orbitkv.state.StateKey;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;

/**
 * {@link CatalogTransport} over gRPC: each call goes on the shared authenticated channel to the
 * owner's endpoint ({@link ClusterChannels}) with a per-call deadline. Thread-safe, non-blocking;
 * {@code DEADLINE_EXCEEDED} completes the future with a {@link TimeoutException}, so lookups report
 * it as {@link KeyLocation.UnknownReason#TIMED_OUT}; {@code UNAUTHENTICATED} (the owner refused this
 * node's credentials) is counted and logged, rate-limited, in {@link AuthFailures}. Closed channels
 * (the Manager stopping) and replies that do not decode fail the call, as an unreachable owner does;
 * anything else thrown while converting a reply is a bug, counted ({@link UnexpectedErrors}, layer
 * {@code cluster}) before it fails the call.
 */
public final class GrpcCatalogTransport implements CatalogTransport {

    private final ClusterChannels channels;
    private final AuthFailures failures;

    public GrpcCatalogTransport(ClusterChannels channels) {
        this(channels, new AuthFailures(new io.micrometer.core.instrument.simple.SimpleMeterRegistry()));
    }

    public GrpcCatalogTransport(ClusterChannels channels, AuthFailures failures) {
        this.channels = channels;
        this.failures = failures;
    }

    /** The stub for {@code owner}; empty once the channels closed (the Manager is stopping). */
    private Optional<CatalogGrpc.CatalogFutureStub> stub(Member owner, long timeoutMillis) {
        return channels.tryChannel(owner.endpoint())
                .map(c -> CatalogGrpc.newFutureStub(c).withDeadlineAfter(timeoutMillis, TimeUnit.MILLISECONDS));
    }

    /** A call that could not start because the channels closed: failed, as the contract says an unreachable owner is. */
    private static <T> CompletableFuture<T> closed(Member owner) {
        return CompletableFuture.failedFuture(new IllegalStateException("cluster channels are closed: " + owner.nodeId() + " not called"));
    }

    @Override
    public CompletableFuture<PushBatch.Reply> push(Member owner, PushBatch batch, long timeoutMillis) {
        return stub(owner, timeoutMillis)
                .map(s -> adapt(owner, "catalog push", s.push(CatalogCodec.request(batch)), CatalogCodec::reply))
                .orElseGet(() -> closed(owner));
    }

    @Override
    public CompletableFuture<List<KeyLocation>> lookup(Member owner, List<StateKey> keys, List<Member> live,
                                                       long viewDigest, long timeoutMillis) {
        LookupRequest.Builder r = LookupRequest.newBuilder().setViewDigest(viewDigest);
        for (StateKey k : keys) r.addKeys(CatalogCodec.key(k));
        for (Member m : live) r.addLive(CatalogCodec.live(m));
        return stub(owner, timeoutMillis).map(s -> adapt(owner, "catalog lookup", s.lookup(r.build()), (LookupReply reply) -> {
            List<KeyLocation> out = new ArrayList<>(reply.getResultsCount());
            reply.getResultsList().forEach(k -> out.add(CatalogCodec.location(k)));
            return out;
        })).orElseGet(() -> closed(owner));
    }

    private <P, T> CompletableFuture<T> adapt(Member owner, String what, ListenableFuture<P> call, Function<P, T> convert) {
        CompletableFuture<T> out = new CompletableFuture<>();
        Futures.addCallback(call, new FutureCallback<>() {
            @Override
            public void onSuccess(P result) {
                try {
                    out.complete(convert.apply(result));
                } catch (IllegalArgumentException e) {
                    out.completeExceptionally(e); // a reply that does not decode (CatalogCodec): the owner's error, a failed call
                } catch (RuntimeException e) {
                    UnexpectedErrors.record(UnexpectedErrors.Layer.CLUSTER, "GrpcCatalogTransport.convert",
                            "a failed " + what + " (keys unknown, pushes retried)", e);
                    out.completeExceptionally(e);
                }
            }

            @Override
            public void onFailure(Throwable t) {
                if (t instanceof StatusRuntimeException s && s.getStatus().getCode() == Status.Code.UNAUTHENTICATED) {
                    failures.record(AuthFailures.Reason.REFUSED_BY_PEER, what + " refused by " + owner.nodeId() + "#"
                            + owner.incarnation() + " at " + owner.endpoint() + " (" + s.getStatus().getDescription() + ")");
                }
                if (t instanceof StatusRuntimeException s && s.getStatus().getCode() == Status.Code.DEADLINE_EXCEEDED) {
                    out.completeExceptionally(new TimeoutException(s.getMessage()));
                } else {
                    out.completeExceptionally(t);
                }
            }
        }, MoreExecutors.directExecutor());
        return out;
    }
}
