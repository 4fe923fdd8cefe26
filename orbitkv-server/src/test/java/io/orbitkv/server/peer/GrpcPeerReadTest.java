package io.orbitkv.server.peer;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.log.UnexpectedErrors;
import io.orbitkv.core.namespace.NamespaceTable;
import io.orbitkv.core.peer.AuthorizeRequest;
import io.orbitkv.core.peer.AuthorizeResult;
import io.orbitkv.core.peer.MemberView;
import io.orbitkv.core.peer.NodeIncarnation;
import io.orbitkv.core.peer.PayloadSink;
import io.orbitkv.core.peer.PayloadTransport;
import io.orbitkv.core.peer.PeerCandidate;
import io.orbitkv.core.peer.PeerEndpoint;
import io.orbitkv.core.peer.PeerMedium;
import io.orbitkv.core.peer.PeerReadResult;
import io.orbitkv.core.peer.PeerReader;
import io.orbitkv.core.peer.PeerSource;
import io.orbitkv.core.peer.ReleaseRetrier;
import io.orbitkv.core.peer.TicketTable;
import io.orbitkv.core.storage.TieredStore;
import io.orbitkv.core.storage.TieredStoreConfig;
import io.orbitkv.core.storage.dram.CommitResult;
import io.orbitkv.core.storage.dram.DramTierConfig;
import io.orbitkv.core.storage.dram.Reservation;
import io.orbitkv.core.storage.dram.SizeClass;
import io.orbitkv.core.storage.publish.PublishConfig;
import io.orbitkv.core.storage.publish.SsdAdmissionPolicy;
import io.orbitkv.core.storage.ssd.SsdConfig;
import io.orbitkv.server.cluster.ClusterChannels;
import io.orbitkv.server.cluster.ClusterRpcServer;
import io.orbitkv.server.cluster.ClusterSecurity;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * Peer reads over a real loopback gRPC server with cluster authentication: a multi-chunk page
 * arrives bit-identical and tickets are released; a requester that cancels mid-stream leaves the
 * source with no running transfer and no pin; an unauthenticated requester gets nothing.
 */
class GrpcPeerReadTest {

    static final int NS = 1;
    static final NamespaceDigest DIGEST = new NamespaceDigest(11, 12, 13, 14);
    static final int PAGE = 1024 * 1024 + 4096; // two chunks (PeerReadService.CHUNK_BYTES), the last one short
    static final int SLOT = 2 * 1024 * 1024;
    static final NodeIncarnation A = new NodeIncarnation("a", 3);
    static final NodeIncarnation B = new NodeIncarnation("b", 4);
    static final ClusterSecurity SECURITY = security("orbit-t", "0123456789abcdef-peer");

    static ClusterSecurity security(String cluster, String token) {
        return new ClusterSecurity(cluster, token.getBytes(StandardCharsets.UTF_8), Optional.empty());
    }

    static final MemberView MEMBERS = new MemberView() {
        @Override
        public boolean validForRemoteWork() {
            return true;
        }

        @Override
        public Optional<NodeIncarnation> live(String nodeId) {
            return Optional.ofNullable(switch (nodeId) {
                case "a" -> A;
                case "b" -> B;
                default -> null;
            });
        }
    };

    @TempDir
    Path dir;

    TieredStore sourceStore;
    TieredStore requesterStore;
    TicketTable tickets;
    ClusterRpcServer server;
    ClusterChannels channels;
    PeerEndpoint endpoint;
    GrpcPayloadTransport transport;

    static TieredStore store(Path dir, String name) throws Exception {
        NamespaceTable namespaces = new NamespaceTable(4);
        namespaces.register(NS, DIGEST);
        DramTierConfig dram = new DramTierConfig(Files.createDirectories(dir.resolve("dram-" + name)), "grpc" + name,
                List.of(new SizeClass(SLOT, 4)), 2L * SLOT, SLOT, 64);
        SsdConfig ssd = SsdConfig.of(Files.createDirectories(dir.resolve("ssd-" + name))).withMaxPayloadBytes(SLOT)
                .withFiles(2, 8L << 20).withIo(1, 64).withPinnedWaitNanos(TimeUnit.MILLISECONDS.toNanos(20))
                .withBuffers(64 * 1024, 64 * 1024);
        return TieredStore.open(new TieredStoreConfig(dram, ssd,
                PublishConfig.defaults(new SsdAdmissionPolicy.ReuseAware(1_000_000)), 1 << 16, 64), namespaces,
                new SimpleMeterRegistry());
    }

    @BeforeEach
    void start() throws Exception {
        sourceStore = store(dir, "a");
        requesterStore = store(dir, "b");
        NamespaceTable ns = new NamespaceTable(4);
        ns.register(NS, DIGEST);
        tickets = new TicketTable(8, TimeUnit.SECONDS.toNanos(30));
        PeerSource source = new PeerSource(A, sourceStore, ns, MEMBERS, tickets, System::nanoTime);
        server = ClusterRpcServer.start(new InetSocketAddress("127.0.0.1", 0), SECURITY, List.of(new PeerReadService(source)));
        endpoint = new PeerEndpoint(A, "127.0.0.1:" + server.address().getPort());
        channels = new ClusterChannels(SECURITY);
        transport = new GrpcPayloadTransport(channels, Duration.ofSeconds(5), Duration.ofSeconds(10));
    }

    @AfterEach
    void stop() {
        channels.close();
        server.close();
        sourceStore.close();
        requesterStore.close();
    }

    static byte[] bytes(long seed) {
        byte[] b = new byte[PAGE];
        new Random(seed).nextBytes(b);
        return b;
    }

    static StateKey key(long seed) {
        ByteBuffer b = ByteBuffer.allocate(StateKey.BYTES);
        Random r = new Random(seed * 31 + 7);
        for (int i = 0; i < 4; i++) b.putLong(r.nextLong());
        return StateKey.ofBytes(b.array());
    }

    long put(StateKey key, byte[] payload) {
        Reservation r = (Reservation) sourceStore.reserve(key, NS, payload.length);
        MemorySegment.copy(MemorySegment.ofArray(payload), 0, r.segment(), 0, payload.length);
        return ((CommitResult.Inserted) sourceStore.commit(r)).imageId();
    }

    PeerCandidate candidate(StateKey key, long generation) {
        return new PeerCandidate(endpoint, key, DIGEST, PeerMedium.DRAM, generation, sourceStore.residency().lastSequence());
    }

    void awaitSourceIdle() {
        await().atMost(Duration.ofSeconds(10)).until(() -> tickets.size() == 0 && tickets.activeTransfers() == 0
                && sourceStore.dram().usage().leases() == 0);
    }

    @Test
    void multiChunkPageArrivesBitIdenticalAndTheTicketIsReleased() {
        StateKey k = key(1);
        byte[] payload = bytes(1);
        long gen = put(k, payload);
        ReleaseRetrier releases = new ReleaseRetrier(transport, 16, 4, TimeUnit.MILLISECONDS.toNanos(50), TimeUnit.SECONDS.toNanos(1));
        PeerReader reader = new PeerReader(B, requesterStore.dram(), MEMBERS, transport, releases, System::nanoTime);

        PeerReadResult.Fetched f = (PeerReadResult.Fetched) reader.read(candidate(k, gen), NS).join();
        assertThat(f.lease().segment().toArray(ValueLayout.JAVA_BYTE)).isEqualTo(payload);
        f.lease().release();

        awaitSourceIdle();
        assertThat(releases.pending()).as("a Fetch owes no Release call").isZero();
        assertThat(releases.ackedTotal()).isZero();
        assertThat(tickets.freedTotal()).as("freed by the source at stream end").isEqualTo(1);
        assertThat(tickets.expiredTotal()).isZero();
        assertThat(requesterStore.dram().usage().reservedBytes()).isZero();
    }

    AuthorizeRequest request(StateKey k, long gen) {
        return new AuthorizeRequest(B, A.incarnation(), k, DIGEST, PeerMedium.DRAM, gen, sourceStore.residency().lastSequence());
    }

    @Test
    void aClosedTransportAnswersEveryCallAsUnreachableWithoutCountingABug() {
        StateKey k = key(8);
        long gen = put(k, bytes(8));
        channels.close(); // the Manager is stopping: an expected outcome, not a bug
        long peer = UnexpectedErrors.count(UnexpectedErrors.Layer.PEER);
        long wire = UnexpectedErrors.count(UnexpectedErrors.Layer.TRANSPORT);
        ReleaseRetrier releases = new ReleaseRetrier(transport, 16, 4, TimeUnit.MILLISECONDS.toNanos(50), TimeUnit.SECONDS.toNanos(1));
        PeerReader reader = new PeerReader(B, requesterStore.dram(), MEMBERS, transport, releases, System::nanoTime);
        assertThat(reader.read(candidate(k, gen), NS).join())
                .isEqualTo(new PeerReadResult.Refused(candidate(k, gen), AuthorizeResult.Rejection.UNREACHABLE));
        assertThat(transport.authorize(endpoint, request(k, gen)).join())
                .isEqualTo(new AuthorizeResult.Rejected(AuthorizeResult.Rejection.UNREACHABLE));
        assertThat(transport.release(endpoint, 1, B).join()).isEqualTo(PayloadTransport.ReleaseAck.FAILED);
        assertThat(UnexpectedErrors.count(UnexpectedErrors.Layer.PEER)).isEqualTo(peer);
        assertThat(UnexpectedErrors.count(UnexpectedErrors.Layer.TRANSPORT)).isEqualTo(wire);
        assertThat(requesterStore.dram().usage().reservedBytes()).isZero();
        assertThat(tickets.size()).isZero();
    }

    @Test
    void fetchOfAGoneGenerationIsRejectedBeforeAnyByte() {
        StateKey k = key(5);
        long gen = put(k, bytes(5));
        PayloadTransport.FetchOutcome outcome = transport.fetch(endpoint, request(k, gen + 7), grant -> {
            throw new AssertionError("no grant for a gone generation");
        }).join();
        assertThat(outcome).isEqualTo(new PayloadTransport.FetchOutcome.Rejected(AuthorizeResult.Rejection.GENERATION_GONE));
        assertThat(tickets.size()).isZero();
        assertThat(sourceStore.dram().usage().leases()).isZero();
    }

    @Test
    void fetchDeclinedAtTheGrantFreesTheTicketAtTheSourceWithoutARelease() {
        StateKey k = key(6);
        long gen = put(k, bytes(6));
        PayloadTransport.FetchOutcome outcome = transport.fetch(endpoint, request(k, gen), grant -> Optional.empty()).join();
        assertThat(outcome).isInstanceOfSatisfying(PayloadTransport.FetchOutcome.Declined.class,
                d -> assertThat(d.releaseOwed()).isFalse());
        awaitSourceIdle();
        assertThat(tickets.expiredTotal()).as("freed by the cancel, not by the window").isZero();
    }

    @Test
    void fetchCancelledMidStreamFreesTheTicketAtTheSourceWithoutARelease() {
        StateKey k = key(7);
        long gen = put(k, bytes(7));
        AtomicInteger chunks = new AtomicInteger();
        PayloadSink rejectSecond = new PayloadSink() {
            @Override
            public boolean onChunk(long offsetBytes, ByteBuffer chunk) {
                return chunks.incrementAndGet() < 2;
            }

            @Override
            public void onTrailer(int crc32c) {
                throw new AssertionError("no trailer after a cancel");
            }
        };
        PayloadTransport.FetchOutcome outcome = transport.fetch(endpoint, request(k, gen), grant -> Optional.of(rejectSecond)).join();
        assertThat(outcome).isInstanceOfSatisfying(PayloadTransport.FetchOutcome.Streamed.class, s -> {
            assertThat(s.end()).isEqualTo(PayloadTransport.TransferEnd.BROKEN);
            assertThat(s.releaseOwed()).isFalse();
        });
        awaitSourceIdle();
        assertThat(tickets.expiredTotal()).isZero();
    }

    @Test
    void requesterCancellingMidStreamEndsTheTransferAtTheSource() {
        StateKey k = key(2);
        long gen = put(k, bytes(2));
        AuthorizeResult.Granted g = (AuthorizeResult.Granted) transport.authorize(endpoint, new AuthorizeRequest(B,
                A.incarnation(), k, DIGEST, PeerMedium.DRAM, gen, sourceStore.residency().lastSequence())).join();
        AtomicInteger chunks = new AtomicInteger();
        PayloadSink rejectSecond = new PayloadSink() {
            @Override
            public boolean onChunk(long offsetBytes, ByteBuffer chunk) {
                return chunks.incrementAndGet() < 2;
            }

            @Override
            public void onTrailer(int crc32c) {
            }
        };
        assertThat(transport.transfer(endpoint, g, B, rejectSecond).join()).isEqualTo(PayloadTransport.TransferEnd.BROKEN);
        await().atMost(Duration.ofSeconds(10)).until(() -> tickets.activeTransfers() == 0);
        assertThat(tickets.size()).as("still granted until released").isEqualTo(1);
        assertThat(transport.release(endpoint, g.ticketId(), B).join()).isEqualTo(PayloadTransport.ReleaseAck.ACKED);
        awaitSourceIdle();
    }

    @Test
    void transferUnderAnotherRequestersTicketIsRefused() {
        StateKey k = key(3);
        long gen = put(k, bytes(3));
        AuthorizeResult.Granted g = (AuthorizeResult.Granted) transport.authorize(endpoint, new AuthorizeRequest(B,
                A.incarnation(), k, DIGEST, PeerMedium.DRAM, gen, sourceStore.residency().lastSequence())).join();
        PayloadSink none = new PayloadSink() {
            @Override
            public boolean onChunk(long offsetBytes, ByteBuffer chunk) {
                throw new AssertionError("no bytes for a foreign ticket");
            }

            @Override
            public void onTrailer(int crc32c) {
                throw new AssertionError("no trailer for a foreign ticket");
            }
        };
        assertThat(transport.transfer(endpoint, g, new NodeIncarnation("b", 5), none).join())
                .isEqualTo(PayloadTransport.TransferEnd.REFUSED);
        transport.release(endpoint, g.ticketId(), B).join();
        awaitSourceIdle();
    }

    @Test
    void unauthenticatedRequesterGetsNothingPinned() throws Exception {
        StateKey k = key(4);
        long gen = put(k, bytes(4));
        try (ClusterChannels wrong = new ClusterChannels(security("orbit-t", "0123456789abcdef-xxxx"))) {
            GrpcPayloadTransport intruder = new GrpcPayloadTransport(wrong, Duration.ofSeconds(5), Duration.ofSeconds(5));
            AuthorizeResult r = intruder.authorize(endpoint, new AuthorizeRequest(B, A.incarnation(), k, DIGEST,
                    PeerMedium.DRAM, gen, sourceStore.residency().lastSequence())).join();
            assertThat(r).isEqualTo(new AuthorizeResult.Rejected(AuthorizeResult.Rejection.UNREACHABLE));
        }
        assertThat(tickets.size()).isZero();
        assertThat(sourceStore.dram().usage().leases()).isZero();
    }
}
