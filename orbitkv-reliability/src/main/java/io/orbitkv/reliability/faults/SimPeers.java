package io.orbitkv.reliability.faults;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.catalog.CatalogLookups;
import io.orbitkv.core.catalog.CatalogPublisher;
import io.orbitkv.core.catalog.CatalogTransport;
import io.orbitkv.core.catalog.KeyLocation;
import io.orbitkv.core.catalog.Member;
import io.orbitkv.core.catalog.MembershipView;
import io.orbitkv.core.catalog.PushBatch;
import io.orbitkv.core.catalog.ShardState;
import io.orbitkv.core.cost.CostObserver;
import io.orbitkv.core.namespace.NamespaceTable;
import io.orbitkv.core.peer.CatalogCandidates;
import io.orbitkv.core.peer.LocalTransport;
import io.orbitkv.core.peer.MembershipMembers;
import io.orbitkv.core.peer.NodeIncarnation;
import io.orbitkv.core.peer.PayloadTransport;
import io.orbitkv.core.peer.PeerPages;
import io.orbitkv.core.peer.PeerReader;
import io.orbitkv.core.peer.PeerRoutes;
import io.orbitkv.core.peer.PeerSource;
import io.orbitkv.core.peer.ReleaseRetrier;
import io.orbitkv.core.peer.TicketTable;
import io.orbitkv.core.query.RemotePages;
import io.orbitkv.core.storage.TieredStore;
import io.orbitkv.state.StateKey;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;

/**
 * A two-Manager cluster in one JVM, wired from the real peer and catalog classes as
 * {@code ClusterPeers} and {@code ClusterNode} wire them in the daemon, with the network replaced
 * by {@link LocalTransport} (decorated by {@link FaultyTransport} on the requester's side) and
 * the catalog RPCs by direct calls on the shard owners' {@link ShardState}s.
 *
 * <ul>
 *   <li><b>a</b>, the requester: the schedule's Manager. Its core's peer routes are a
 *       {@link PeerRoutes} over {@link PeerPages} ({@link CatalogCandidates} over
 *       {@link CatalogLookups}) and a {@link PeerReader} whose transport is the faulty one.</li>
 *   <li><b>b</b>, the source: a second Manager whose engine publishes pages a never has. Its
 *       {@link PeerSource} (ticket table, pins) serves a; its {@link CatalogPublisher} streams
 *       its residency to the shard owners (rendezvous over both members), pumped by the driver;
 *       its core's {@link PeerRoutes} run its ticket expiry and requester revocation.</li>
 * </ul>
 *
 * <p>Each start of either Manager is a new incarnation: the membership view changes, both
 * members' candidate caches are dropped (as {@code ClusterNode} does), b's tickets of a previous
 * a are revoked at b's next tick, and a's fetches held to a previous b end at a's next tick
 * ({@link PayloadTransport#onMemberLeft}).
 *
 * <p>Owns the view, the shard owners, the transports and each life's ticket tables and
 * publisher (each with a meter registry of its own: a second life's gauges would collide with
 * the first's in a shared one). Thread model: the driver starts, stops and pumps; the peer classes run on the
 * threads they run on in the daemon (session threads, the SSD worker, the transport's timer).
 */
final class SimPeers implements AutoCloseable {

    static final String A = "a";
    static final String B = "b";
    private static final String A_ADDRESS = "mem:a";
    private static final String B_ADDRESS = "mem:b";
    /** As the daemon's: a ticket may pin its page 30 s without a release. */
    static final long TICKET_WINDOW_NANOS = TimeUnit.SECONDS.toNanos(30);
    private static final Duration LOOKUP_DEADLINE = Duration.ofMillis(500);

    /** 8 KiB chunks: a 20 KiB page moves in three, and a reset can stop it after one or two. */
    private final LocalTransport network = new LocalTransport(8 * 1024);
    final FaultyTransport transport;
    private final Map<String, ShardState> owners = new ConcurrentHashMap<>();
    private final Map<String, Member> live = new ConcurrentHashMap<>();
    private volatile MembershipView view = MembershipView.initial();
    private long revision;
    private long incarnations;

    // a's current life
    private volatile CatalogLookups aLookups;
    private volatile PeerRoutes aRoutes;
    private volatile TicketTable aTickets;
    // b's current life
    private volatile TicketTable bTickets;
    private volatile CatalogPublisher bPublisher;
    private volatile CatalogLookups bLookups;
    private volatile PeerRoutes bRoutes;
    private volatile LongSupplier clock = System::nanoTime;

    SimPeers(FaultPlan plan) {
        this.transport = new FaultyTransport(network, plan);
    }

    /** a's peer routes: reads through the faulty transport. */
    final SimManager.Wiring requester = new SimManager.Wiring() {
        @Override
        public RemotePages open(TieredStore store, NamespaceTable namespaces, LongSupplier nanoClock) {
            clock = nanoClock;
            NodeIncarnation self = join(A, A_ADDRESS);
            aTickets = new TicketTable(64, TICKET_WINDOW_NANOS);
            aLookups = lookups();
            aRoutes = routes(self, store, namespaces, aTickets, transport, aLookups, nanoClock);
            network.serve(A_ADDRESS, aSource);
            return aRoutes;
        }

        @Override
        public void close() {
            network.down(A_ADDRESS);
            leave(A);
            aTickets.drainAll();
        }
    };

    /** b's peer routes: serves a through the clean network; reads nothing (no candidates). */
    final SimManager.Wiring source = new SimManager.Wiring() {
        @Override
        public RemotePages open(TieredStore store, NamespaceTable namespaces, LongSupplier nanoClock) {
            NodeIncarnation self = join(B, B_ADDRESS);
            bTickets = new TicketTable(64, TICKET_WINDOW_NANOS);
            bLookups = lookups();
            bRoutes = routes(self, store, namespaces, bTickets, network, bLookups, nanoClock);
            bPublisher = new CatalogPublisher(B, self.incarnation(), store.residency(), store::residentKeys, catalog,
                    new CatalogPublisher.Budgets(1024, 65_536, 64, 2_000, 65_536, 50, 5_000, 1_000), new SimpleMeterRegistry(),
                    new java.util.SplittableRandom(self.incarnation()));
            network.serve(B_ADDRESS, bSource);
            return bRoutes;
        }

        @Override
        public void close() {
            down();
            bTickets.drainAll();
        }
    };

    // the sources of the current lives, set by routes()
    private volatile PeerSource aSource;
    private volatile PeerSource bSource;

    private PeerRoutes routes(NodeIncarnation self, TieredStore store, NamespaceTable namespaces, TicketTable tickets,
                              PayloadTransport over, CatalogLookups lookups, LongSupplier nanoClock) {
        MembershipMembers members = new MembershipMembers(() -> view, self);
        PeerSource src = new PeerSource(self, store, namespaces, members, tickets, nanoClock);
        if (self.nodeId().equals(A)) aSource = src;
        else bSource = src;
        ReleaseRetrier releases = new ReleaseRetrier(over, 256, 4, TimeUnit.MILLISECONDS.toNanos(10),
                TimeUnit.MILLISECONDS.toNanos(100));
        PeerReader reader = new PeerReader(self, store.dram(), members, over, releases, nanoClock);
        CatalogCandidates candidates = new CatalogCandidates(lookups, () -> view, self.nodeId(), LOOKUP_DEADLINE,
                CatalogCandidates.DEFAULT_LOOKUP_KEYS_IN_FLIGHT);
        PeerPages pages = new PeerPages(candidates, reader, members, SimManager.SLOT, CostObserver.disabled(), nanoClock);
        return new PeerRoutes(pages, src, releases, () -> view, members, over::onMemberLeft);
    }

    private CatalogLookups lookups() {
        return new CatalogLookups(() -> view, catalog, Duration.ofSeconds(30), 4_096,
                new SimpleMeterRegistry());
    }

    private synchronized NodeIncarnation join(String nodeId, String address) {
        long incarnation = ++incarnations;
        owners.put(nodeId, new ShardState(nodeId, incarnation, new ShardState.Budgets(8, 1 << 16),
                new SimpleMeterRegistry()));
        live.put(nodeId, new Member(nodeId, address, incarnation));
        publishView();
        return new NodeIncarnation(nodeId, incarnation);
    }

    private synchronized void leave(String nodeId) {
        live.remove(nodeId);
        owners.remove(nodeId);
        publishView();
    }

    private void publishView() {
        List<Member> members = new ArrayList<>(live.values());
        members.sort(null);
        view = MembershipView.valid(members, ++revision);
        // as ClusterNode does on a membership change: candidates of a previous view are not trusted
        if (aLookups != null) aLookups.invalidateCandidates();
        if (bLookups != null) bLookups.invalidateCandidates();
    }

    /** b stops answering at once (its process died); its membership ends with it. */
    void down() {
        network.down(B_ADDRESS);
        leave(B);
    }

    /** b's publisher streams what changed in b's tiers to the shard owners, until it has nothing left (bounded). */
    boolean pump() {
        CatalogPublisher p = bPublisher;
        if (p == null || !live.containsKey(B)) return true;
        for (int i = 0; i < 16; i++) {
            if (p.pump(view, clock.getAsLong())) return true;
        }
        return false;
    }

    /** Whether nothing of the peer work is in flight: a's fetches, held network calls, transfers at b. */
    boolean idle() {
        return aRoutes.status().fetchesInFlight() == 0 && transport.heldCalls() == 0 && bTickets.activeTransfers() == 0;
    }

    /** What the peer side still holds; empty at quiescence. */
    List<String> leftovers() {
        List<String> held = new ArrayList<>();
        PeerRoutes.Status a = aRoutes.status();
        SimManager.nonZero(held, "a peer fetches in flight", a.fetchesInFlight());
        SimManager.nonZero(held, "a releases pending", a.releasesPending());
        SimManager.nonZero(held, "a tickets", aTickets.size());
        SimManager.nonZero(held, "network calls held", transport.heldCalls());
        SimManager.nonZero(held, "b tickets", bTickets.size());
        SimManager.nonZero(held, "b transfers", bTickets.activeTransfers());
        return held;
    }

    @Override
    public void close() {
        transport.close();
    }

    /** The catalog RPCs, answered by the owner's shard state in the caller's thread. */
    private final CatalogTransport catalog = new CatalogTransport() {
        @Override
        public CompletableFuture<PushBatch.Reply> push(Member owner, PushBatch batch, long timeoutMillis) {
            ShardState s = owners.get(owner.nodeId());
            if (s == null || s.ownerIncarnation() != owner.incarnation()) {
                return CompletableFuture.failedFuture(new IllegalStateException(owner + " is down"));
            }
            return CompletableFuture.completedFuture(s.apply(batch));
        }

        @Override
        public CompletableFuture<List<KeyLocation>> lookup(Member owner, List<StateKey> keys, List<Member> members,
                                                           long viewDigest, long timeoutMillis) {
            ShardState s = owners.get(owner.nodeId());
            if (s == null || s.ownerIncarnation() != owner.incarnation()) {
                return CompletableFuture.failedFuture(new IllegalStateException(owner + " is down"));
            }
            return CompletableFuture.completedFuture(s.lookup(keys, members, viewDigest));
        }
    };
}
