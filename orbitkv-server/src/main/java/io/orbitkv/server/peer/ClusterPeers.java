package io.orbitkv.server.peer;

import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.core.catalog.MembershipView;
import io.orbitkv.core.peer.CatalogCandidates;
import io.orbitkv.core.peer.MembershipMembers;
import io.orbitkv.core.peer.NodeIncarnation;
import io.orbitkv.core.peer.PeerPages;
import io.orbitkv.core.peer.PeerReader;
import io.orbitkv.core.peer.PeerRoutes;
import io.orbitkv.core.peer.PeerSource;
import io.orbitkv.core.peer.ReleaseRetrier;
import io.orbitkv.core.peer.TicketTable;
import io.orbitkv.core.storage.NamespaceTable;
import io.orbitkv.core.storage.TieredStore;
import io.orbitkv.core.storage.dram.ArenaGeometry;
import io.orbitkv.server.config.ClusterConfig;
import io.orbitkv.server.cluster.ClusterNode;

import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

/**
 * A clustered Manager's peer reads, wired from its real membership and catalog: the source
 * ({@link PeerSource} behind {@link PeerReadService} on the cluster server) and the requester
 * ({@link PeerReader} over {@link GrpcPayloadTransport}, fed by {@link CatalogCandidates}), with
 * their periodic duties in {@link PeerRoutes} — the {@code RemotePages} the daemon hands to
 * {@code ManagerCore}.
 *
 * <p>Owns the {@link ClusterNode} it starts and the ticket table; {@link #close()} leaves the
 * cluster and then drains every ticket (pins released). Thread model: built and closed on the
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

    private final ClusterNode node;
    private final TicketTable tickets;
    private final PeerRoutes routes;
    private final CatalogCandidates candidates;

    private ClusterPeers(ClusterNode node, TicketTable tickets, PeerRoutes routes, CatalogCandidates candidates) {
        this.node = node;
        this.tickets = tickets;
        this.routes = routes;
        this.candidates = candidates;
    }

    /**
     * Joins the cluster with the peer service registered and builds the requester side.
     *
     * @throws IOException as {@link ClusterNode#start} does
     */
    public static ClusterPeers start(ClusterConfig config, Path stateDir, TieredStore store, NamespaceTable namespaces,
                                     MeterRegistry registry, LongSupplier nanoClock) throws IOException {
        Objects.requireNonNull(config, "config");
        AtomicReference<ClusterNode> started = new AtomicReference<>();
        Supplier<MembershipView> view = () -> {
            ClusterNode n = started.get();
            return n == null ? MembershipView.initial() : n.view();
        };
        TicketTable tickets = new TicketTable(TICKETS, TICKET_WINDOW.toNanos());
        AtomicReference<PeerSource> source = new AtomicReference<>();
        ClusterNode node = ClusterNode.start(config, stateDir, store, registry, incarnation -> {
            NodeIncarnation self = new NodeIncarnation(config.nodeId(), incarnation);
            source.set(new PeerSource(self, store, namespaces, new MembershipMembers(view, self), tickets, nanoClock));
            return List.of(new PeerReadService(source.get()));
        });
        started.set(node);
        NodeIncarnation self = source.get().self();
        MembershipMembers members = new MembershipMembers(view, self);
        GrpcPayloadTransport transport = new GrpcPayloadTransport(node.channels(), CONTROL_DEADLINE, TRANSFER_DEADLINE);
        ReleaseRetrier releases = new ReleaseRetrier(transport, PENDING_RELEASES, 8,
                TimeUnit.MILLISECONDS.toNanos(50), TimeUnit.SECONDS.toNanos(2));
        PeerReader reader = new PeerReader(self, store.dram(), members, transport, releases, nanoClock);
        CatalogCandidates candidates = new CatalogCandidates(node.lookups(), view, config.nodeId(), node.lookupTimeout(),
                CatalogCandidates.DEFAULT_LOOKUP_KEYS_IN_FLIGHT);
        PeerPages pages = new PeerPages(candidates, reader, members, largestSlot(store.dram().geometry()),
                store.costObserver(), nanoClock);
        return new ClusterPeers(node, tickets, new PeerRoutes(pages, source.get(), releases, view, members), candidates);
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

    /** Leaves the cluster (no new transfer can start), then frees every ticket's pin. */
    @Override
    public void close() {
        node.close();
        tickets.drainAll();
    }
}
