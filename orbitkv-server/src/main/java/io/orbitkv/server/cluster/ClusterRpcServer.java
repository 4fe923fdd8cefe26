package io.orbitkv.server.cluster;

import io.grpc.BindableService;
import io.grpc.InsecureServerCredentials;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallExecutorSupplier;
import io.grpc.ServerCredentials;
import io.grpc.ServerInterceptors;
import io.grpc.TlsServerCredentials;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.Objects;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

/**
 * The Manager's cluster endpoint: one gRPC server on a TCP address ({@code --cluster-listen
 * host:port}) hosting every cluster service (cluster info, catalog, peer reads), each behind
 * {@link ClusterAuth}, with mutual TLS when {@link ClusterSecurity#tls()} names files.
 *
 * <p>Owns the server socket and the handler executor. Thread model: {@link #start} and
 * {@link #close()} run on the lifecycle thread; handlers run on virtual threads (control-plane
 * work that may block on a lock or a bounded queue), except those of a {@link NonBlockingService}
 * (peer reads), which run on the Netty event loop ({@code directExecutor()}). Invariant: every hosted service is
 * intercepted; there is no way to add one without authentication.
 *
 * <p>Design note: one port for all services keeps deployment to one address per node in etcd
 * (the member record names exactly one endpoint). Handler concurrency is bounded by
 * {@link #MAX_CONCURRENT_STREAMS_PER_CONNECTION} per peer connection (HTTP/2 flow control), so a
 * misbehaving peer cannot queue unbounded work; with 3-16 peers that is at most a few thousand
 * virtual threads, each a few KiB.
 */
public final class ClusterRpcServer implements AutoCloseable {

    /** HTTP/2 streams one peer connection may have open at once. */
    public static final int MAX_CONCURRENT_STREAMS_PER_CONNECTION = 256;
    /** Largest inbound message, bytes (a 2 MiB page plus framing fits). */
    public static final int MAX_INBOUND_MESSAGE_BYTES = 8 << 20;

    private final Server server;
    private final ExecutorService executor;

    private ClusterRpcServer(Server server, ExecutorService executor) {
        this.server = server;
        this.executor = executor;
    }

    /**
     * Binds {@code address} and starts serving {@code services}.
     *
     * @throws IOException if the address cannot be bound or a TLS file cannot be read
     */
    public static ClusterRpcServer start(InetSocketAddress address, ClusterSecurity security,
                                         List<BindableService> services) throws IOException {
        return start(address, security, services, new ClusterAuth(security));
    }

    /** As above, counting and logging refused calls in {@code auth}'s {@link AuthFailures}. */
    public static ClusterRpcServer start(InetSocketAddress address, ClusterSecurity security,
                                         List<BindableService> services, ClusterAuth auth) throws IOException {
        Objects.requireNonNull(address, "address");
        ExecutorService executor = Executors.newVirtualThreadPerTaskExecutor();
        Set<String> direct = new HashSet<>();
        for (BindableService service : services) {
            if (service instanceof NonBlockingService) direct.add(service.bindService().getServiceDescriptor().getName());
        }
        NettyServerBuilder builder = NettyServerBuilder.forAddress(address, serverCredentials(security))
                // The server's own executor is direct (method lookup on the event loop, a map get);
                // the supplier then moves every call of a service that may block to a virtual thread
                // before its first message is delivered. The inverse (virtual by default, direct by
                // supplier) would still run the first callbacks (the whole unary handler) on a
                // virtual thread: grpc-java asks the supplier only after the call was queued there.
                .directExecutor()
                .callExecutor(new ServerCallExecutorSupplier() {
                    @Override
                    public <ReqT, RespT> Executor getExecutor(ServerCall<ReqT, RespT> call, Metadata metadata) {
                        return direct.contains(call.getMethodDescriptor().getServiceName()) ? null : executor;
                    }
                })
                .maxConcurrentCallsPerConnection(MAX_CONCURRENT_STREAMS_PER_CONNECTION)
                .maxInboundMessageSize(MAX_INBOUND_MESSAGE_BYTES);
        for (BindableService service : services) {
            builder.addService(ServerInterceptors.intercept(service, auth));
        }
        try {
            return new ClusterRpcServer(builder.build().start(), executor);
        } catch (IOException | RuntimeException e) {
            executor.shutdownNow();
            throw e;
        }
    }

    static ServerCredentials serverCredentials(ClusterSecurity security) throws IOException {
        if (security.tls().isEmpty()) return InsecureServerCredentials.create();
        ClusterSecurity.TlsFiles files = security.tls().get();
        return TlsServerCredentials.newBuilder()
                .keyManager(files.certChain().toFile(), files.privateKey().toFile())
                .trustManager(files.trustedCa().toFile())
                .clientAuth(TlsServerCredentials.ClientAuth.REQUIRE)
                .build();
    }

    /** The bound address (the port is the real one when 0 was asked for). */
    public InetSocketAddress address() {
        return (InetSocketAddress) server.getListenSockets().getFirst();
    }

    /** Stops accepting, lets in-flight calls finish for up to 2 s, then cancels the rest. */
    @Override
    public void close() {
        server.shutdown();
        try {
            if (!server.awaitTermination(2, TimeUnit.SECONDS)) {
                server.shutdownNow();
                server.awaitTermination(2, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            server.shutdownNow();
            Thread.currentThread().interrupt();
        } finally {
            executor.shutdownNow();
        }
    }
}
