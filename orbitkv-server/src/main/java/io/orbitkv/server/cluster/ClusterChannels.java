package io.orbitkv.server.cluster;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ChannelCredentials;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.CompositeChannelCredentials;
import io.grpc.Context;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.TlsChannelCredentials;
import java.io.IOException;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * Client channels to cluster peers, one per endpoint, each carrying this node's cluster
 * credentials ({@link ClusterAuth#callCredentials()}, over mutual TLS when configured).
 *
 * <p>Owns the channels it created. Thread model: thread-safe; {@link #channel} may be called from
 * any thread and returns the shared channel for an endpoint. Invariant: at most
 * {@link #MAX_CHANNELS} channels are open; asking for one more closes none and fails loudly (a
 * cluster of more nodes than that is a configuration this build does not support).
 *
 * <p>Design note: gRPC channels multiplex every call to a peer over one HTTP/2 connection and
 * reconnect on their own, so one long-lived channel per peer (not per call: a TLS handshake costs
 * ~1-3 ms) is the right unit. Endpoints come from membership records, so a restarted peer on the
 * same address reuses its channel. Call callbacks run on the channel's Netty event loop
 * ({@code directExecutor()}): it saves one thread hop per message (~20–50 µs each: the grant and
 * every payload chunk of a peer read's Fetch stream), and no callback here blocks — peer-read futures hand
 * their result to the Manager's callback executor ({@code whenCompleteAsync}), payload chunks are
 * one bounded memory copy into a reserved slot, catalog replies merge under a short monitor.
 *
 * <p>Every call is started detached from the caller's gRPC {@link Context} ({@link #DETACHED}): a
 * call otherwise inherits the context of whatever server call it was started under, and is
 * cancelled when that call completes. A remote prepare answers its caller at once and goes on
 * staging (its catalog lookup may even complete on the handler's own thread, this node's shard
 * being answered in process), so its peer reads were cancelled ("io.grpc.Context was cancelled
 * without error") whenever the answer went out before they finished. Each call here carries its
 * own deadline; none relies on the caller's.
 */
public final class ClusterChannels implements AutoCloseable {

    /** Peer endpoints with an open channel, at most. */
    public static final int MAX_CHANNELS = 256;

    /** Creates each call under {@link Context#ROOT}, so no caller's cancellation or deadline reaches it. */
    static final ClientInterceptor DETACHED = new ClientInterceptor() {
        @Override
        public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
            Context previous = Context.ROOT.attach();
            try {
                return next.newCall(method, options);
            } finally {
                Context.ROOT.detach(previous);
            }
        }
    };

    private final ChannelCredentials credentials;
    private final Map<String, ManagedChannel> channels = new ConcurrentHashMap<>();
    private volatile boolean closed;

    public ClusterChannels(ClusterSecurity security) throws IOException {
        this.credentials = CompositeChannelCredentials.create(transport(security),
                new ClusterAuth(security).callCredentials());
    }

    private static ChannelCredentials transport(ClusterSecurity security) throws IOException {
        if (security.tls().isEmpty()) return InsecureChannelCredentials.create();
        ClusterSecurity.TlsFiles files = security.tls().get();
        return TlsChannelCredentials.newBuilder()
                .keyManager(files.certChain().toFile(), files.privateKey().toFile())
                .trustManager(files.trustedCa().toFile())
                .build();
    }

    /** The shared channel to {@code endpoint} ({@code host:port}), created on first use. */
    public ManagedChannel channel(String endpoint) {
        return tryChannel(endpoint).orElseThrow(() -> new IllegalStateException("cluster channels are closed"));
    }

    /**
     * As {@link #channel}, but empty once {@link #close()} ran (the Manager is stopping: a call
     * not started is an expected outcome, answered as an unreachable peer by the caller). More than
     * {@link #MAX_CHANNELS} endpoints still throws: that is a configuration this build refuses loudly.
     */
    public Optional<ManagedChannel> tryChannel(String endpoint) {
        Objects.requireNonNull(endpoint, "endpoint");
        if (closed) return Optional.empty();
        return Optional.of(channels.computeIfAbsent(endpoint, e -> {
            if (channels.size() >= MAX_CHANNELS) {
                throw new IllegalStateException("more than " + MAX_CHANNELS + " peer endpoints");
            }
            return Grpc.newChannelBuilder(e, credentials)
                    .directExecutor()
                    .intercept(DETACHED)
                    .maxInboundMessageSize(ClusterRpcServer.MAX_INBOUND_MESSAGE_BYTES)
                    .build();
        }));
    }

    /** Closes every channel, waiting up to 1 s each for calls in flight. */
    @Override
    public void close() {
        closed = true;
        for (ManagedChannel c : channels.values()) {
            c.shutdownNow();
            try {
                c.awaitTermination(1, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
        channels.clear();
    }
}
