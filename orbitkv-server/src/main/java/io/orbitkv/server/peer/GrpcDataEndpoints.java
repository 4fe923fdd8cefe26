package io.orbitkv.server.peer;

import io.grpc.ManagedChannel;
import io.grpc.stub.StreamObserver;
import io.orbitkv.core.log.UnexpectedErrors;
import io.orbitkv.core.peer.NodeIncarnation;
import io.orbitkv.core.peer.PeerEndpoint;
import io.orbitkv.server.cluster.ClusterChannels;
import io.orbitkv.server.config.ClusterConfig;
import io.orbitkv.server.peer.bulk.BulkLayout;
import io.orbitkv.server.peer.bulk.BulkPayloadTransport;
import io.orbitkv.server.peer.proto.DataEndpointCall;
import io.orbitkv.server.peer.proto.DataEndpointReply;
import io.orbitkv.server.peer.proto.PeerReadGrpc;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;

/**
 * Finds a source's bulk data endpoint with the {@code PeerRead.DataEndpoint} RPC on its cluster
 * port (authenticated like every cluster call) and caches the answer per source incarnation.
 *
 * <p>Owns the cache (at most {@link #MAX_ENTRIES} entries; cleared whole when full, since entries
 * are one RPC to rebuild). Thread model: thread-safe; never blocks ({@link #dataAddress} returns
 * the cached future or starts one RPC).
 *
 * <p>Invariants: a positive answer is kept for the incarnation's life (a restarted source is a
 * new {@link PeerEndpoint} and asks again) and only if the source answered for that incarnation
 * and speaks {@link BulkLayout#VERSION}; a negative answer (no data plane, older build, RPC
 * failed) is kept {@link #NEGATIVE_TTL} so a source that is briefly unreachable is asked again
 * soon, not on every batch.
 */
public final class GrpcDataEndpoints implements BulkPayloadTransport.Endpoints {

    public static final int MAX_ENTRIES = 1_024;
    public static final Duration NEGATIVE_TTL = Duration.ofSeconds(5);

    private record Entry(CompletableFuture<Optional<InetSocketAddress>> address, long askedNanos) {}

    private final ClusterChannels channels;
    private final Duration deadline;
    private final LongSupplier nanoClock;
    private final Map<PeerEndpoint, Entry> cache = new ConcurrentHashMap<>();

    public GrpcDataEndpoints(ClusterChannels channels, Duration deadline, LongSupplier nanoClock) {
        this.channels = Objects.requireNonNull(channels, "channels");
        this.deadline = Objects.requireNonNull(deadline, "deadline");
        this.nanoClock = Objects.requireNonNull(nanoClock, "nanoClock");
    }

    @Override
    public CompletableFuture<Optional<InetSocketAddress>> dataAddress(PeerEndpoint source) {
        long now = nanoClock.getAsLong();
        Entry e = cache.get(source);
        if (e != null && !stale(e, now)) return e.address();
        if (cache.size() >= MAX_ENTRIES) cache.clear();
        Entry fresh = new Entry(new CompletableFuture<>(), now);
        Entry raced = cache.compute(source, (k, old) -> old != null && !stale(old, now) ? old : fresh);
        if (raced == fresh) ask(source, fresh.address());
        return raced.address();
    }

    private boolean stale(Entry e, long now) {
        CompletableFuture<Optional<InetSocketAddress>> f = e.address();
        return f.isDone() && f.join().isEmpty() && now - e.askedNanos() > NEGATIVE_TTL.toNanos();
    }

    private void ask(PeerEndpoint source, CompletableFuture<Optional<InetSocketAddress>> answer) {
        try {
            Optional<ManagedChannel> channel = channels.tryChannel(source.address());
            if (channel.isEmpty()) {
                answer.complete(Optional.empty()); // channels closed: the Manager is stopping
                return;
            }
            PeerReadGrpc.newStub(channel.get())
                    .withDeadlineAfter(deadline.toNanos(), TimeUnit.NANOSECONDS)
                    .dataEndpoint(DataEndpointCall.getDefaultInstance(), new StreamObserver<>() {
                        @Override
                        public void onNext(DataEndpointReply reply) {
                            answer.complete(address(source, reply));
                        }

                        @Override
                        public void onError(Throwable t) {
                            answer.complete(Optional.empty()); // UNIMPLEMENTED (older build) or unreachable: gRPC Fetch
                        }

                        @Override
                        public void onCompleted() {
                            answer.complete(Optional.empty());
                        }
                    });
        } catch (RuntimeException e) {
            // more endpoints than ClusterChannels.MAX_CHANNELS (a refused configuration), or a bug
            UnexpectedErrors.record(UnexpectedErrors.Layer.TRANSPORT, "GrpcDataEndpoints.ask",
                    "no data endpoint (pages go over gRPC)", e);
            answer.complete(Optional.empty());
        }
    }

    static Optional<InetSocketAddress> address(PeerEndpoint source, DataEndpointReply reply) {
        if (reply.getPort() < 1 || reply.getPort() > 65_535 || reply.getWireVersion() != BulkLayout.VERSION
                || reply.getIncarnation() != source.node().incarnation()) {
            return Optional.empty();
        }
        String host = reply.getHost().isEmpty() ? ClusterConfig.listenAddress(source.address()).getHostString() : reply.getHost();
        return Optional.of(InetSocketAddress.createUnresolved(host, reply.getPort()));
    }

    @Override
    public void forget(NodeIncarnation member) {
        cache.keySet().removeIf(e -> e.node().equals(member));
    }
}
