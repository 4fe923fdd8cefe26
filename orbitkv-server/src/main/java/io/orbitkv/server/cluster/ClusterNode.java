package io.orbitkv.server.cluster;

import io.grpc.BindableService;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.core.catalog.CatalogLookups;
import io.orbitkv.core.catalog.CatalogPublisher;
import io.orbitkv.core.catalog.CatalogTransport;
import io.orbitkv.core.catalog.Member;
import io.orbitkv.core.catalog.MembershipView;
import io.orbitkv.core.catalog.SelfShardTransport;
import io.orbitkv.core.catalog.ShardState;
import io.orbitkv.core.log.UnexpectedErrors;
import io.orbitkv.core.storage.TieredStore;
import io.orbitkv.server.config.ClusterConfig;
import io.orbitkv.server.membership.EtcdMembership;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.LongFunction;
import java.util.function.Supplier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * A Manager's membership of a cluster: its incarnation (persistent epoch), the authenticated
 * cluster gRPC server (cluster info, catalog shard, and any services added by other packages),
 * the etcd membership, the catalog publisher loop and the catalog lookups. Each key's residency
 * evidence is placed on {@link ClusterConfig#catalogReplicas()} owners (docs/cluster.md,
 * "Placement, replication and handoff"); this node's shard judges lookups' placement versions
 * against its own view.
 *
 * <p>Another member joins this node's view only after the mutual credential proof
 * ({@link CredentialProof}); refused calls on both sides are counted and logged ({@link AuthFailures}).
 *
 * <p>Owns all of those. Thread model: {@link #start} and {@link #close()} run on the daemon's
 * lifecycle thread; one platform thread ({@code orbitkv-catalog}) runs the publisher loop;
 * {@link #view()} and {@link #lookups()} are safe from any thread. Invariants: remote work starts
 * only from a valid view (the publisher and lookups check it); shard state of members that left a
 * valid view is dropped; local work never waits on anything here.
 *
 * <p>Design note: the publisher polls the residency stream every {@link #IDLE_POLL} (20 ms) when
 * it has nothing to send and loops at once otherwise: residency changes reach shard owners within
 * ~20 ms plus one RPC, without a wake-up hook in the storage owners' hot paths.
 */
public final class ClusterNode implements AutoCloseable {

    /** Publisher poll period while idle. */
    public static final Duration IDLE_POLL = Duration.ofMillis(20);
    /** Keys a shard owner keeps per source (~100 bytes of heap each: ~100 MB). */
    public static final int SHARD_KEYS_PER_SOURCE = 1_000_000;
    /** Sources a shard owner tracks. */
    public static final int SHARD_SOURCES = 64;
    /**
     * Positive candidates cached, and for how long. 30 s: engines query once per request, seconds
     * apart, so a shorter life (it was 2 s) let every answer expire before the next QUERY used it;
     * a stale positive costs one refused authorization and a replan, never a wrong hit.
     */
    public static final long CANDIDATES = 65_536;
    public static final Duration CANDIDATE_TTL = Duration.ofSeconds(30);
    /** Catalog lookup calls in flight at once on this requester (its fan-out bound). */
    public static final int LOOKUP_CALLS_IN_FLIGHT = 256;

    private final Member self;
    private final ClusterChannels channels;
    private final ClusterRpcServer server;
    private final EtcdMembership membership;
    private final ShardState shard;
    private final CatalogPublisher publisher;
    private final CatalogLookups lookups;
    private final Duration lookupTimeout;
    private final Thread loop;
    private final Counter loopErrors;
    private volatile boolean closed;

    private ClusterNode(Member self, ClusterChannels channels, ClusterRpcServer server, EtcdMembership membership,
                        ShardState shard, CatalogPublisher publisher, CatalogLookups lookups, Duration lookupTimeout,
                        MeterRegistry registry) {
        this.loopErrors = Counter.builder("orbitkv_catalog_loop_errors").description("catalog publish loop rounds that threw").register(registry);
        this.self = self;
        this.channels = channels;
        this.server = server;
        this.membership = membership;
        this.shard = shard;
        this.publisher = publisher;
        this.lookups = lookups;
        this.lookupTimeout = lookupTimeout;
        this.loop = Thread.ofPlatform().name("orbitkv-catalog").daemon().unstarted(this::publishLoop);
    }

    /**
     * Joins the cluster: takes the next incarnation from {@code stateDir}, starts the cluster
     * server with {@code extraServices}, registers in etcd and starts publishing {@code store}'s
     * residency. etcd being down does not fail the start (the view stays invalid).
     *
     * @throws io.orbitkv.server.config.ConfigException if the token file is refused
     *                     ({@link ClusterSecurity#fromTokenFile}); checked before the epoch is taken
     * @throws IOException if the TLS files cannot be read, the epoch cannot be stored, or the
     *                     cluster address cannot be bound
     */
    public static ClusterNode start(ClusterConfig config, Path stateDir, TieredStore store, MeterRegistry registry,
                                    List<BindableService> extraServices) throws IOException {
        return start(config, stateDir, store, registry, incarnation -> extraServices);
    }

    /**
     * As above, with the extra services built for this life's incarnation (the peer source
     * authorizes against it), before the server starts.
     */
    public static ClusterNode start(ClusterConfig config, Path stateDir, TieredStore store, MeterRegistry registry,
                                    LongFunction<List<BindableService>> extraServicesFor) throws IOException {
        ClusterSecurity security = ClusterSecurity.load(config);
        long incarnation = EtcdMembership.startIncarnation(config.etcdEndpoints(), config.clusterId(), config.nodeId(),
                stateDir, Duration.ofSeconds(2));
        List<BindableService> extraServices = extraServicesFor.apply(incarnation);
        EtcdMembership[] membership = new EtcdMembership[1];
        Supplier<MembershipView> view = () -> membership[0] == null ? MembershipView.initial() : membership[0].view();
        ShardState shard = new ShardState(config.nodeId(), incarnation,
                new ShardState.Budgets(SHARD_SOURCES, SHARD_KEYS_PER_SOURCE), registry, view);
        AuthFailures authFailures = new AuthFailures(registry);
        ClusterChannels channels = new ClusterChannels(security);
        GrpcCatalogTransport grpc = new GrpcCatalogTransport(channels, authFailures);
        // calls to this node's own shard are answered in process, the rest go over gRPC
        CatalogTransport transport = new SelfShardTransport(config.nodeId(), incarnation, shard, grpc);
        CredentialProof proof = new CredentialProof(config.nodeId(), security, channels, authFailures);
        Duration lookupTimeout = Duration.ofMillis(config.lookupTimeoutMillis());
        CatalogLookups lookups = new CatalogLookups(view, transport, CANDIDATE_TTL, CANDIDATES, config.catalogReplicas(),
                LOOKUP_CALLS_IN_FLIGHT, registry);
        List<BindableService> services = new ArrayList<>();
        services.add(new ClusterInfoService(config.nodeId(), incarnation, keys -> lookups.lookup(keys, lookupTimeout), proof));
        services.add(new CatalogService(shard));
        services.addAll(extraServices);
        ClusterRpcServer server;
        try {
            server = ClusterRpcServer.start(ClusterConfig.listenAddress(config.listen()), security, services,
                    new ClusterAuth(security, authFailures));
        } catch (IOException | RuntimeException e) {
            channels.close();
            throw e;
        }
        String host = ClusterConfig.listenAddress(config.listen()).getHostString();
        Member self = new Member(config.nodeId(), host + ":" + server.address().getPort(), incarnation);
        membership[0] = EtcdMembership.start(new EtcdMembership.Settings(config.etcdEndpoints(), config.clusterId(), self,
                Duration.ofMillis(config.leaseTtlMillis()), Duration.ofMillis(200), Duration.ofSeconds(2)), proof, registry);
        CatalogPublisher publisher = new CatalogPublisher(config.nodeId(), incarnation, store.residency(),
                store::residentKeys, transport, CatalogPublisher.Budgets.defaults(), config.catalogReplicas(), registry,
                new java.util.SplittableRandom());
        ClusterNode node = new ClusterNode(self, channels, server, membership[0], shard, publisher, lookups, lookupTimeout, registry);
        node.loop.start();
        return node;
    }

    private void publishLoop() {
        long lastDigest = 0;
        while (!closed) {
            boolean idle = true;
            try {
                MembershipView v = membership.view();
                if (v.valid() && v.digest() != lastDigest) {
                    shard.retainMembers(v.live());
                    lookups.invalidateCandidates();
                    lastDigest = v.digest();
                }
                idle = publisher.pump(v, System.nanoTime());
            } catch (RuntimeException e) {
                // a bug outside any push (pushes and drains are values): count, log, keep running
                loopErrors.increment();
                UnexpectedErrors.record(UnexpectedErrors.Layer.CLUSTER, "ClusterNode.publishLoop",
                        "a skipped publish round (the next one reads on)", e);
            }
            if (idle) LockSupport.parkNanos(IDLE_POLL.toNanos());
        }
    }

    /** This node as registered: id, cluster endpoint, incarnation. */
    public Member self() {
        return self;
    }

    /** The current membership view (no etcd call). */
    public MembershipView view() {
        return membership.view();
    }

    /** Catalog lookups through this node's view; {@link #lookupTimeout()} is the configured deadline. */
    public CatalogLookups lookups() {
        return lookups;
    }

    public Duration lookupTimeout() {
        return lookupTimeout;
    }

    /** Authenticated channels to peers (shared; for services added by other packages). */
    public ClusterChannels channels() {
        return channels;
    }

    /** True when a shard owner refused this incarnation's stream as stale. */
    public boolean stale() {
        return publisher.stale();
    }

    /** The part of the ready line describing the cluster endpoint. */
    public String readyFragment() {
        return "cluster=" + self.endpoint() + " node=" + self.nodeId() + " incarnation=" + self.incarnation();
    }

    /**
     * How this node left the cluster (after {@link #close()}): the lease revoked, or left to
     * expire because etcd was unreachable; see {@link EtcdMembership#close()}.
     */
    public EtcdMembership.Leave leave() {
        return membership.leave();
    }

    /**
     * Leaves: stops publishing, revokes the lease when etcd is reachable (bounded, see
     * {@link EtcdMembership#close()}), stops the server and the channels.
     */
    @Override
    public void close() {
        closed = true;
        LockSupport.unpark(loop);
        try {
            loop.join(TimeUnit.SECONDS.toMillis(5));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        membership.close();
        server.close();
        channels.close();
    }

    /** Logs a one-line cluster summary (startup). */
    public void describe() {
        System.getLogger(ClusterNode.class.getName()).log(System.Logger.Level.INFO,
                "cluster member " + self.nodeId() + "#" + self.incarnation() + " on " + self.endpoint());
    }
}
