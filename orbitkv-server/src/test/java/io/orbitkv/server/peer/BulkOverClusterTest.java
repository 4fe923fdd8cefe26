package io.orbitkv.server.peer;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.namespace.NamespaceTable;
import io.orbitkv.core.peer.NodeIncarnation;
import io.orbitkv.core.peer.PeerCandidate;
import io.orbitkv.core.peer.PeerEndpoint;
import io.orbitkv.core.peer.PeerMedium;
import io.orbitkv.core.peer.PeerReadResult;
import io.orbitkv.core.peer.PeerReader;
import io.orbitkv.core.peer.PeerSource;
import io.orbitkv.core.peer.ReleaseRetrier;
import io.orbitkv.core.peer.TicketTable;
import io.orbitkv.core.storage.TieredStore;
import io.orbitkv.core.storage.dram.CommitResult;
import io.orbitkv.core.storage.dram.Reservation;
import io.orbitkv.server.cluster.ClusterChannels;
import io.orbitkv.server.cluster.ClusterRpcServer;
import io.orbitkv.server.peer.bulk.BulkLayout;
import io.orbitkv.server.peer.bulk.BulkLimits;
import io.orbitkv.server.peer.bulk.BulkPayloadTransport;
import io.orbitkv.server.peer.bulk.BulkServer;
import io.orbitkv.state.StateKey;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

import static io.orbitkv.server.peer.GrpcPeerReadTest.A;
import static io.orbitkv.server.peer.GrpcPeerReadTest.B;
import static io.orbitkv.server.peer.GrpcPeerReadTest.DIGEST;
import static io.orbitkv.server.peer.GrpcPeerReadTest.MEMBERS;
import static io.orbitkv.server.peer.GrpcPeerReadTest.NS;
import static io.orbitkv.server.peer.GrpcPeerReadTest.SECURITY;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * The data plane as {@code ClusterPeers} wires it: the requester finds the source's data endpoint
 * with the {@code DataEndpoint} RPC on the authenticated cluster port and reads pages over the
 * bulk connection; a source that answers no data endpoint (an older build) is read over gRPC Fetch.
 */
class BulkOverClusterTest {

    @TempDir
    Path dir;

    final List<AutoCloseable> open = new ArrayList<>();

    @AfterEach
    void close() throws Exception {
        for (AutoCloseable c : open.reversed()) c.close();
    }

    <T extends AutoCloseable> T open(T c) {
        open.add(c);
        return c;
    }

    record Fixture(TieredStore source, TieredStore requester, TicketTable tickets, PeerEndpoint endpoint,
                   BulkPayloadTransport transport, PeerReader reader, Optional<BulkServer> bulk) {}

    Fixture fixture(boolean withDataPlane) throws Exception {
        TieredStore sourceStore = open(GrpcPeerReadTest.store(dir, "a"));
        TieredStore requesterStore = open(GrpcPeerReadTest.store(dir, "b"));
        NamespaceTable ns = new NamespaceTable(4);
        ns.register(NS, DIGEST);
        TicketTable tickets = new TicketTable(8, TimeUnit.SECONDS.toNanos(30));
        PeerSource source = new PeerSource(A, sourceStore, ns, MEMBERS, tickets, System::nanoTime);
        Optional<BulkServer> bulk = Optional.empty();
        Optional<PeerReadService.DataEndpoint> data = Optional.empty();
        if (withDataPlane) {
            BulkServer server = open(BulkServer.start(new InetSocketAddress("127.0.0.1", 0), source, SECURITY,
                    BulkLimits.defaults(), new SimpleMeterRegistry()));
            bulk = Optional.of(server);
            data = Optional.of(new PeerReadService.DataEndpoint("", server.address().getPort(), BulkLayout.VERSION));
        }
        ClusterRpcServer rpc = open(ClusterRpcServer.start(new InetSocketAddress("127.0.0.1", 0), SECURITY,
                List.of(new PeerReadService(source, data))));
        PeerEndpoint endpoint = new PeerEndpoint(A, "127.0.0.1:" + rpc.address().getPort());
        ClusterChannels channels = open(new ClusterChannels(SECURITY));
        GrpcPayloadTransport control = new GrpcPayloadTransport(channels, Duration.ofSeconds(5), Duration.ofSeconds(10));
        BulkPayloadTransport transport = open(new BulkPayloadTransport(control,
                new GrpcDataEndpoints(channels, Duration.ofSeconds(5), System::nanoTime), SECURITY, BulkLimits.defaults(),
                new SimpleMeterRegistry()));
        PeerReader reader = new PeerReader(B, requesterStore.dram(), MEMBERS, transport,
                new ReleaseRetrier(transport, 16, 4, TimeUnit.MILLISECONDS.toNanos(50), TimeUnit.SECONDS.toNanos(1)),
                System::nanoTime);
        return new Fixture(sourceStore, requesterStore, tickets, endpoint, transport, reader, bulk);
    }

    static List<PeerCandidate> put(Fixture f, int count) {
        List<PeerCandidate> out = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            StateKey k = GrpcPeerReadTest.key(40 + i);
            byte[] payload = GrpcPeerReadTest.bytes(40 + i);
            Reservation r = (Reservation) f.source().reserve(k, NS, payload.length);
            MemorySegment.copy(MemorySegment.ofArray(payload), 0, r.segment(), 0, payload.length);
            long gen = ((CommitResult.Inserted) f.source().commit(r)).imageId();
            out.add(new PeerCandidate(f.endpoint(), k, DIGEST, PeerMedium.DRAM, gen, f.source().residency().lastSequence()));
        }
        return out;
    }

    static void readAndCheck(Fixture f, List<PeerCandidate> candidates) {
        List<PeerReadResult> results = f.reader().readBatch(candidates, NS).stream()
                .map(r -> r.orTimeout(20, TimeUnit.SECONDS).join()).toList();
        for (int i = 0; i < candidates.size(); i++) {
            PeerReadResult.Fetched fetched = (PeerReadResult.Fetched) results.get(i);
            assertThat(fetched.lease().segment().toArray(ValueLayout.JAVA_BYTE)).isEqualTo(GrpcPeerReadTest.bytes(40 + i));
            fetched.lease().release();
        }
    }

    @Test
    void theRequesterFindsTheDataEndpointByRpcAndReadsOverTheDataPlane() throws Exception {
        Fixture f = fixture(true);
        List<PeerCandidate> candidates = put(f, 1); // the shared store fixture keeps one 2 MiB page resident
        readAndCheck(f, candidates);
        assertThat(f.bulk().orElseThrow().batchesServed()).as("one bulk request").isEqualTo(1);
        assertThat(f.transport().connections()).isEqualTo(1);
        f.transport().onMemberLeft(new NodeIncarnation("a", A.incarnation()));
        await().atMost(Duration.ofSeconds(10)).until(() -> f.transport().connections() == 0);
    }

    @Test
    void aSourceWithoutADataPlaneIsReadOverGrpcFetch() throws Exception {
        Fixture f = fixture(false);
        List<PeerCandidate> candidates = put(f, 1); // the shared store fixture keeps one 2 MiB page resident
        readAndCheck(f, candidates);
        assertThat(f.transport().connections()).isZero();
        assertThat(f.tickets().size()).isZero();
    }
}
