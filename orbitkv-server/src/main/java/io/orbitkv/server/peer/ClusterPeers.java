package io.orbitkv.server.peer;

import io.grpc.BindableService;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.core.catalog.MembershipView;
import io.orbitkv.core.namespace.NamespaceTable;
import io.orbitkv.core.peer.CatalogCandidates;
import io.orbitkv.core.peer.MembershipMembers;
import io.orbitkv.core.peer.NodeIncarnation;
import io.orbitkv.core.peer.PeerPages;
import io.orbitkv.core.peer.PeerReader;
import io.orbitkv.core.peer.PeerRoutes;
import io.orbitkv.core.peer.PeerSource;
import io.orbitkv.core.peer.ReleaseRetrier;
import io.orbitkv.core.peer.TicketTable;
import io.orbitkv.core.storage.TieredStore;
import io.orbitkv.core.storage.dram.ArenaGeometry;
import io.orbitkv.server.cluster.ClusterSecurity;
import io.orbitkv.server.config.ClusterConfig;
import io.orbitkv.server.cluster.ClusterNode;
import io.orbitkv.server.peer.bulk.BulkLayout;
import io.orbitkv.server.peer.bulk.BulkLimits;
import io.orbitkv.server.peer.bulk.BulkPayloadTransport;
import io.orbitkv.server.peer.bulk.BulkServer;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

/**
 * A clustered Manager's peer reads, wired from its real membership and catalog: the source
 * ({@link PeerSource} behind {@link PeerReadService} on the cluster server for control, and behind
 * a {@link BulkServer} on the data plane address for page bytes) and the requester
 * ({@link PeerReader} over {@link BulkPayloadTransport}, whose control transport and fallback is
 * {@link GrpcPayloadTransport}, fed by {@link CatalogCandidates}), with their periodic duties in
 * {@link PeerRoutes} — the {@code RemotePages} the daemon hands to {@code ManagerCore}. A member
 * that leaves the view has its data connections closed at the next tick
 * ({@link BulkPayloadTransport#onMemberLeft}), so its fetches in flight end as misses at once.
 *
 * <p>Owns the {@link ClusterNode} it starts, the bulk server and transport, and the ticket table;
 * {@link #close()} stops fetching, leaves the cluster, stops the data plane and then drains every
 * ticket (pins released). Thread model: built and closed on the
 * daemon's lifecycle thread; {@link #routes()} is thread-safe (see {@link PeerRoutes}).
 *
 * <p>Invariant: the peer service authorizes against exactly the incarnation this life registers
 * in etcd (it is built from the incarnation {@link ClusterNode#start} takes), and nothing is
 * served or requested before that registration is in a valid view.
 *
 * <p>Design note (budgets): {@link #TICKETS} 1,024 tickets × at most one 2 MiB page pinned each
 * bounds what requesters can pin here to the DRAM tier's own slots (a full tier refuses first);
 * the 30 s {@link #TICKET_WINDOW} outlives the release retrier's ~6 s of retries (50 ms → 2 s, 8
 * attempts) so a late release still frees earlier than expiry; control RPCs get 2 s and a
 * transfer 10 s (a 2 MiB page moves in ~2 ms on loopback, so only a hung source hits it).
 */
public final class ClusterPeers implements AutoCloseable {

    /** Tickets a source keeps (each pins one page). */
    public static final int TICKETS = 1_024;
    /** How long a ticket's pin may live without a release. */
    public static final Duration TICKET_WINDOW = Duration.ofSeconds(30);
    /** Releases the requester keeps retrying. */
    public static final int PENDING_RELEASES = 4_096;
    public static final Duration CONTROL_DEADLINE = Duration.ofSeconds(2);
    public static final Duration TRANSFER_DEADLINE = Duration.ofSeconds(10);

    /** Bounds of the data plane (docs/peer-data-plane.md, "Bounds"). */
    public static final BulkLimits BULK_LIMITS = BulkLimits.defaults();

    private final ClusterNode node;
    private final TicketTable tickets;
    private final PeerRoutes routes;
    private final CatalogCandidates candidates;
    private final BulkServer bulkServer;
    private final BulkPayloadTransport bulk;
    private final MeterRegistry registry;
    private final List<Meter> meters;

    private ClusterPeers(ClusterNode node, TicketTable tickets, PeerRoutes routes, CatalogCandidates candidates,
                         BulkServer bulkServer, BulkPayloadTransport bulk, MeterRegistry registry) {
        this.node = node;
        this.tickets = tickets;
        this.routes = routes;
        this.candidates = candidates;
        this.bulkServer = bulkServer;
        this.bulk = bulk;
        this.registry = registry;
        this.meters = PeerMeters.register(registry, routes);
    }

    /**
     * Joins the cluster with the peer service registered and builds the requester side.
     *
     * @throws IOException as {@link ClusterNode#start} does
     */
    public static ClusterPeers start(ClusterConfig config, Path stateDir, TieredStore store, NamespaceTable namespaces,
                                     MeterRegistry registry, LongSupplier nanoClock) throws IOException {
        return start(config, stateDir, store, namespaces, registry, nanoClock, List.of());
    }

    /** As above, with more services on the cluster server (the Manager's {@code Preparation}). */
    public static ClusterPeers start(ClusterConfig config, Path stateDir, TieredStore store, NamespaceTable namespaces,
                                     MeterRegistry registry, LongSupplier nanoClock, List<BindableService> extra)
            throws IOException {
        Objects.requireNonNull(config, "config");
        AtomicReference<ClusterNode> started = new AtomicReference<>();
        Supplier<MembershipView> view = () -> {
            ClusterNode n = started.get();
            return n == null ? MembershipView.initial() : n.view();
        };
        TicketTable tickets = new TicketTable(TICKETS, TICKET_WINDOW.toNanos());
        ClusterSecurity security = security(config);
        AtomicReference<PeerSource> source = new AtomicReference<>();
        AtomicReference<BulkServer> bulkServer = new AtomicReference<>();
        ClusterNode node;
        try {
            node = ClusterNode.start(config, stateDir, store, registry, incarnation -> {
                NodeIncarnation self = new NodeIncarnation(config.nodeId(), incarnation);
                source.set(new PeerSource(self, store, namespaces, new MembershipMembers(view, self), tickets, nanoClock));
                try {
                    bulkServer.set(BulkServer.start(config.dataListenAddress(), source.get(), security, BULK_LIMITS, registry));
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
                InetSocketAddress data = bulkServer.get().address();
                String host = data.getAddress() != null && data.getAddress().isAnyLocalAddress() ? "" : data.getHostString();
                List<BindableService> services = new ArrayList<>(extra);
                services.add(new PeerReadService(source.get(),
                        Optional.of(new PeerReadService.DataEndpoint(host, data.getPort(), BulkLayout.VERSION))));
                return services;
            });
        } catch (UncheckedIOException e) {
            throw e.getCause();
        } catch (IOException | RuntimeException e) {
            if (bulkServer.get() != null) bulkServer.get().close();
            throw e;
        }
        started.set(node);
        NodeIncarnation self = source.get().self();
        MembershipMembers members = new MembershipMembers(view, self);
        GrpcPayloadTransport control = new GrpcPayloadTransport(node.channels(), CONTROL_DEADLINE, TRANSFER_DEADLINE);
        BulkPayloadTransport transport;
        try {
            transport = new BulkPayloadTransport(control, new GrpcDataEndpoints(node.channels(), CONTROL_DEADLINE, nanoClock),
                    security, BULK_LIMITS, registry);
        } catch (IOException | RuntimeException e) {
            node.close();
            bulkServer.get().close();
            throw e;
        }
        ReleaseRetrier releases = new ReleaseRetrier(transport, PENDING_RELEASES, 8,
                TimeUnit.MILLISECONDS.toNanos(50), TimeUnit.SECONDS.toNanos(2));
        PeerReader reader = new PeerReader(self, store.dram(), members, transport, releases, nanoClock);
        CatalogCandidates candidates = new CatalogCandidates(node.lookups(), view, config.nodeId(), node.lookupTimeout(),
                CatalogCandidates.DEFAULT_LOOKUP_KEYS_IN_FLIGHT);
        PeerPages pages = new PeerPages(candidates, reader, members, largestSlot(store.dram().geometry()),
                store.costObserver(), nanoClock);
        return new ClusterPeers(node, tickets, new PeerRoutes(pages, source.get(), releases, view, members, transport::onMemberLeft),
                candidates, bulkServer.get(), transport, registry);
    }

    /** The credentials of the cluster port, for the data plane too (same token, same TLS files). */
    private static ClusterSecurity security(ClusterConfig config) throws IOException {
        Optional<ClusterSecurity.TlsFiles> tls = config.tlsCert().map(cert ->
                new ClusterSecurity.TlsFiles(cert, config.tlsKey().orElseThrow(), config.tlsCa().orElseThrow()));
        return ClusterSecurity.fromTokenFile(config.clusterId(), config.tokenFile().orElseThrow(), tls);
    }

    private static long largestSlot(ArenaGeometry geometry) {
        return geometry.arenas().stream().mapToLong(ArenaGeometry.ClassArena::slotBytes).max().orElseThrow();
    }

    /** The cluster membership this Manager joined. */
    public ClusterNode node() {
        return node;
    }

    /** The peer routes for {@code ManagerCore}. */
    public PeerRoutes routes() {
        return routes;
    }

    /** The requester's catalog candidates (lookup counters). */
    public CatalogCandidates candidates() {
        return candidates;
    }

    /** Where this Manager's bulk data plane listens. */
    public InetSocketAddress dataAddress() {
        return bulkServer.address();
    }

    /**
     * Stops fetching (fetches in flight end as misses), leaves the cluster (no new transfer can
     * start), stops the data plane (its connection threads release what they hold), then frees
     * every ticket's pin.
     */
    @Override
    public void close() {
        for (Meter m : meters) registry.remove(m);
        bulk.close();
        node.close();
        bulkServer.close();
        tickets.drainAll();
    }
}
