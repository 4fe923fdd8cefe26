package io.orbitkv.server.peer.bulk;

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
import io.orbitkv.server.cluster.ClusterSecurity;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.io.TempDir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * The bulk data plane over real loopback sockets in one JVM: two sources (a, c), each a
 * {@link PeerSource} behind a {@link BulkServer}, and one requester (b) whose {@link PeerReader}
 * runs over a {@link BulkPayloadTransport} whose control transport refuses everything (so every
 * page seen arrived over the data plane).
 */
class BulkPeerReadTest {

    static final int NS = 1;
    static final NamespaceDigest DIGEST = new NamespaceDigest(21, 22, 23, 24);
    /** Bytes per source write in these tests: each {@link #PAGE} goes out in two pieces. */
    static final int PIECE = 256 * 1024;
    static final int PAGE = 300 * 1024 + 17; // two pieces of PIECE, the last one odd
    static final int SLOT = 512 * 1024;
    static final int SLOTS = 80; // index weight = 80 - 8 reservable - 4 evicted-but-leased slots: room for 68 pages
    static final NodeIncarnation A = new NodeIncarnation("a", 3);
    static final NodeIncarnation B = new NodeIncarnation("b", 4);
    static final NodeIncarnation C = new NodeIncarnation("c", 5);
    static final ClusterSecurity SECURITY = security("0123456789abcdef-bulk");

    static ClusterSecurity security(String token) {
        return new ClusterSecurity("orbit-bulk", token.getBytes(StandardCharsets.UTF_8), Optional.empty());
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
                case "c" -> C;
                default -> null;
            });
        }
    };

    /** The control plane of these tests: refuses everything, and counts what reached it. */
    static final class RefusingControl implements PayloadTransport {
        final AtomicInteger calls = new AtomicInteger();

        @Override
        public CompletableFuture<AuthorizeResult> authorize(PeerEndpoint source, AuthorizeRequest request) {
            calls.incrementAndGet();
            return CompletableFuture.completedFuture(new AuthorizeResult.Rejected(AuthorizeResult.Rejection.UNREACHABLE));
        }

        @Override
        public CompletableFuture<TransferEnd> transfer(PeerEndpoint source, AuthorizeResult.Granted ticket,
                                                       NodeIncarnation requester, PayloadSink sink) {
            calls.incrementAndGet();
            return CompletableFuture.completedFuture(TransferEnd.BROKEN);
        }

        @Override
        public CompletableFuture<ReleaseAck> release(PeerEndpoint source, long ticketId, NodeIncarnation requester) {
            calls.incrementAndGet();
            return CompletableFuture.completedFuture(ReleaseAck.FAILED);
        }
    }

    /** One source Manager: store, tickets, peer source and its bulk server. */
    static final class Source implements AutoCloseable {
        final TieredStore store;
        final TicketTable tickets = new TicketTable(64, TimeUnit.SECONDS.toNanos(30));
        final BulkServer server;
        final PeerEndpoint endpoint;

        Source(Path dir, NodeIncarnation self, BulkLimits limits) throws Exception {
            this(dir, self, limits, SECURITY);
        }

        Source(Path dir, NodeIncarnation self, BulkLimits limits, ClusterSecurity security) throws Exception {
            store = store(dir, self.nodeId());
            NamespaceTable ns = new NamespaceTable(4);
            ns.register(NS, DIGEST);
            PeerSource source = new PeerSource(self, store, ns, MEMBERS, tickets, System::nanoTime);
            server = BulkServer.start(new InetSocketAddress("127.0.0.1", 0), source, security, limits, new SimpleMeterRegistry());
            server.pieceBytes(PIECE);
            // the cluster (gRPC) address is never dialled here: the control transport refuses everything
            endpoint = new PeerEndpoint(self, "127.0.0.1:1");
        }

        long put(StateKey key) {
            byte[] payload = bytes(key);
            Reservation r = (Reservation) store.reserve(key, NS, payload.length);
            MemorySegment.copy(MemorySegment.ofArray(payload), 0, r.segment(), 0, payload.length);
            return ((CommitResult.Inserted) store.commit(r)).imageId();
        }

        PeerCandidate candidate(StateKey key, long generation) {
            return new PeerCandidate(endpoint, key, DIGEST, PeerMedium.DRAM, generation, store.residency().lastSequence());
        }

        void awaitIdle() {
            await().atMost(Duration.ofSeconds(10)).until(() -> tickets.size() == 0 && tickets.activeTransfers() == 0
                    && store.dram().usage().leases() == 0);
        }

        @Override
        public void close() {
            server.close();
            store.close();
        }
    }

    @TempDir
    Path dir;

    Source a;
    Source c;
    TieredStore requesterStore;
    final RefusingControl control = new RefusingControl();
    final Map<NodeIncarnation, InetSocketAddress> dataAddresses = new ConcurrentHashMap<>();
    BulkPayloadTransport transport;
    PeerReader reader;

    static TieredStore store(Path dir, String name) throws Exception {
        NamespaceTable namespaces = new NamespaceTable(4);
        namespaces.register(NS, DIGEST);
        DramTierConfig dram = new DramTierConfig(Files.createDirectories(dir.resolve("dram-" + name)), "bulk" + name,
                List.of(new SizeClass(SLOT, SLOTS)), 8L * SLOT, 4L * SLOT, 64);
        SsdConfig ssd = SsdConfig.of(Files.createDirectories(dir.resolve("ssd-" + name))).withMaxPayloadBytes(SLOT)
                .withFiles(2, 8L << 20).withIo(1, 64).withPinnedWaitNanos(TimeUnit.MILLISECONDS.toNanos(20))
                .withBuffers(64 * 1024, 64 * 1024);
        return TieredStore.open(new TieredStoreConfig(dram, ssd,
                PublishConfig.defaults(new SsdAdmissionPolicy.ReuseAware(1_000_000)), 1 << 16, 64), namespaces,
                new SimpleMeterRegistry());
    }

    static StateKey key(long seed) {
        ByteBuffer b = ByteBuffer.allocate(StateKey.BYTES);
        Random r = new Random(seed * 31 + 11);
        for (int i = 0; i < 4; i++) b.putLong(r.nextLong());
        return StateKey.ofBytes(b.array());
    }

    static byte[] bytes(StateKey key) {
        byte[] b = new byte[PAGE];
        new Random(key.prefix64()).nextBytes(b);
        return b;
    }

    BulkPayloadTransport transport(ClusterSecurity security, BulkLimits limits) throws Exception {
        return new BulkPayloadTransport(control, source -> CompletableFuture.completedFuture(
                Optional.ofNullable(dataAddresses.get(source.node()))), security, limits, new SimpleMeterRegistry());
    }

    void open(BulkLimits limits) throws Exception {
        a = new Source(dir, A, limits);
        c = new Source(dir, C, limits);
        dataAddresses.put(A, a.server.address());
        dataAddresses.put(C, c.server.address());
        requesterStore = store(dir, "b");
        transport = transport(SECURITY, limits);
        reader = new PeerReader(B, requesterStore.dram(), MEMBERS, transport,
                new ReleaseRetrier(transport, 16, 4, TimeUnit.MILLISECONDS.toNanos(50), TimeUnit.SECONDS.toNanos(1)),
                System::nanoTime);
    }

    @BeforeEach
    void start() throws Exception {
        open(BulkLimits.defaults());
    }

    @AfterEach
    void stop() {
        transport.close();
        a.close();
        c.close();
        requesterStore.close();
    }

    List<PeerCandidate> put(Source s, int from, int count) {
        List<PeerCandidate> out = new ArrayList<>();
        for (int i = from; i < from + count; i++) {
            StateKey k = key(i);
            out.add(s.candidate(k, s.put(k)));
        }
        return out;
    }

    /** Releases the fetched pages' leases; returns how many were fetched (each checked bit-identical). */
    static int releaseFetched(List<PeerReadResult> results) {
        int fetched = 0;
        for (PeerReadResult r : results) {
            if (r instanceof PeerReadResult.Fetched f) {
                assertThat(f.lease().segment().toArray(ValueLayout.JAVA_BYTE)).isEqualTo(bytes(f.lease().key()));
                f.lease().release();
                fetched++;
            }
        }
        return fetched;
    }

    static List<PeerReadResult> join(List<CompletableFuture<PeerReadResult>> futures) {
        return futures.stream().map(f -> f.orTimeout(20, TimeUnit.SECONDS).join()).toList();
    }

    void assertRequesterIdle() {
        assertThat(requesterStore.dram().usage().reservedBytes()).as("reservations").isZero();
        assertThat(requesterStore.dram().usage().leases()).as("leases").isZero();
        assertThat(transport.inflightBytes()).isZero();
    }

    @Test
    void aBatchOf32PagesArrivesBitIdenticalInOneRequestPerConnection() {
        List<PeerCandidate> candidates = put(a, 0, 32);
        List<PeerReadResult> results = join(reader.readBatch(candidates, NS));
        for (int i = 0; i < 32; i++) {
            PeerReadResult.Fetched f = (PeerReadResult.Fetched) results.get(i);
            assertThat(f.lease().key()).isEqualTo(candidates.get(i).key());
        }
        assertThat(releaseFetched(results)).isEqualTo(32);
        assertThat(a.server.batchesServed()).as("the batch spread over every connection, 8 pages each").isEqualTo(4);
        assertThat(transport.connections()).isBetween(1, BulkLimits.defaults().connectionsPerPeer());
        assertThat(control.calls).as("nothing went over the control transport").hasValue(0);
        a.awaitIdle();
        assertThat(a.tickets.freedTotal()).as("every ticket freed by the source").isEqualTo(32);
        assertThat(a.tickets.expiredTotal()).isZero();
        assertRequesterIdle();
    }

    @Test
    void twoSourcesServeConcurrentBatchesWithinTheInflightBound() throws Exception {
        stop();
        // one page in flight per peer and per Manager, two connections per peer
        open(BulkLimits.defaults().withConnectionsPerPeer(2).withInflight(PAGE, PAGE));
        List<PeerCandidate> fromA = put(a, 100, 12);
        List<PeerCandidate> fromC = put(c, 200, 12);
        AtomicInteger receiving = new AtomicInteger();
        AtomicInteger mostReceiving = new AtomicInteger();
        List<CompletableFuture<PayloadTransport.FetchOutcome>> outcomes = new ArrayList<>();
        List<byte[]> received = new ArrayList<>();
        for (List<PeerCandidate> half : List.of(fromA.subList(0, 6), fromA.subList(6, 12), fromC.subList(0, 6), fromC.subList(6, 12))) {
            List<AuthorizeRequest> requests = new ArrayList<>();
            List<PayloadTransport.FetchSink> sinks = new ArrayList<>();
            for (PeerCandidate cand : half) {
                requests.add(new AuthorizeRequest(B, cand.source().node().incarnation(), cand.key(), DIGEST, PeerMedium.DRAM,
                        cand.generation(), cand.residencySequence()));
                byte[] copy = new byte[PAGE];
                received.add(copy);
                sinks.add(grant -> {
                    mostReceiving.accumulateAndGet(receiving.incrementAndGet(), Math::max);
                    return Optional.of(new CountingSink(copy, receiving));
                });
            }
            outcomes.addAll(transport.fetchBatch(half.getFirst().source(), requests, sinks));
        }
        for (CompletableFuture<PayloadTransport.FetchOutcome> o : outcomes) {
            assertThat(o.orTimeout(20, TimeUnit.SECONDS).join()).isInstanceOfSatisfying(PayloadTransport.FetchOutcome.Streamed.class,
                    s -> assertThat(s.end()).isEqualTo(PayloadTransport.TransferEnd.COMPLETED));
        }
        List<PeerCandidate> all = new ArrayList<>(fromA);
        all.addAll(fromC);
        for (int i = 0; i < all.size(); i++) assertThat(received.get(i)).isEqualTo(bytes(all.get(i).key()));
        assertThat(mostReceiving.get()).as("pages being received at once, all sources").isEqualTo(1);
        assertThat(transport.inflightPeak()).isEqualTo(PAGE);
        assertThat(transport.inflightBytes()).isZero();
        assertThat(a.server.sendQueuePeak()).as("the source's send queue").isBetween(1L, BulkLimits.defaults().sendQueueBytes());
        a.awaitIdle();
        c.awaitIdle();
    }

    /** A sink that takes the payload through its own segment and counts itself done at the trailer. */
    static final class CountingSink implements PayloadSink {
        final byte[] copy;
        final MemorySegment target = Arena.ofAuto().allocate(PAGE);
        final AtomicInteger receiving;

        CountingSink(byte[] copy, AtomicInteger receiving) {
            this.copy = copy;
            this.receiving = receiving;
        }

        @Override
        public boolean onChunk(long offsetBytes, ByteBuffer chunk) {
            return false;
        }

        @Override
        public Optional<MemorySegment> target() {
            return Optional.of(target);
        }

        @Override
        public boolean onWritten(long offsetBytes, long lengthBytes) {
            return true;
        }

        @Override
        public void onTrailer(int crc32c) {
            MemorySegment.copy(target, 0, MemorySegment.ofArray(copy), 0, PAGE);
            receiving.decrementAndGet();
        }
    }

    @Test
    void aRequesterWithTheWrongTokenIsRefusedAndGetsNothingPinned() throws Exception {
        List<PeerCandidate> candidates = put(a, 300, 2);
        try (BulkPayloadTransport intruder = transport(security("0123456789abcdef-xxxx"), BulkLimits.defaults())) {
            PeerReader wrong = new PeerReader(B, requesterStore.dram(), MEMBERS, intruder,
                    new ReleaseRetrier(intruder, 16, 4, 1_000, 10_000), System::nanoTime);
            for (PeerReadResult r : join(wrong.readBatch(candidates, NS))) {
                assertThat(r).isEqualTo(new PeerReadResult.Refused(candidates.getFirst().key().equals(((PeerReadResult.Refused) r).from().key())
                        ? candidates.getFirst() : candidates.get(1), AuthorizeResult.Rejection.UNREACHABLE));
            }
            await().atMost(Duration.ofSeconds(10)).until(() -> a.server.authFailures() == 1);
            assertThat(intruder.authFailures()).as("the source's ERROR is no valid AUTH_OK").isEqualTo(1);
        }
        assertThat(a.server.batchesServed()).isZero();
        assertThat(a.tickets.size()).isZero();
        assertThat(a.store.dram().usage().leases()).isZero();
        assertRequesterIdle();
    }

    @Test
    void aPayloadCorruptedInFlightIsAMissAndTheOtherPagesArrive() {
        List<PeerCandidate> candidates = put(a, 400, 6);
        a.server.hook(new BulkServer.SendHook() {
            @Override
            public ByteBuffer piece(int index, long offsetBytes, ByteBuffer piece) {
                if (index != 3 || offsetBytes != 0) return piece;
                ByteBuffer copy = ByteBuffer.allocateDirect(piece.remaining()).put(piece.duplicate()).flip();
                copy.put(1000, (byte) (copy.get(1000) ^ 0x10));
                return copy;
            }
        });
        List<PeerReadResult> results = join(reader.readBatch(candidates, NS));
        assertThat(results.get(3)).isEqualTo(new PeerReadResult.Miss(candidates.get(3), PeerReadResult.MissReason.DISCARDED));
        assertThat(releaseFetched(results)).isEqualTo(5);
        assertThat(requesterStore.dram().contains(candidates.get(3).key())).as("never a wrong hit").isFalse();
        a.awaitIdle();
        assertRequesterIdle();
    }

    @ParameterizedTest(name = "pieces of {0} bytes")
    @ValueSource(ints = {PIECE, 1 << 20}) // two pieces per page, the trailer with the second; one piece with the header and the trailer
    void aPageSentAgainReusesItsChecksumWhichStillCatchesBytesCorruptedInFlight(int pieceBytes) {
        a.server.pieceBytes(pieceBytes);
        List<PeerCandidate> candidates = put(a, 600, 4);
        assertThat(releaseFetched(join(reader.readBatch(candidates, NS)))).isEqualTo(4);
        assertThat(a.server.checksumsReused()).as("a first send checksums its pages").isZero();
        for (PeerCandidate c : candidates) requesterStore.dram().evict(c.key());

        assertThat(releaseFetched(join(reader.readBatch(candidates, NS)))).as("bit-identical again").isEqualTo(4);
        assertThat(a.server.checksumsReused()).isEqualTo(4);
        for (PeerCandidate c : candidates) requesterStore.dram().evict(c.key());

        a.server.hook(new BulkServer.SendHook() {
            @Override
            public ByteBuffer piece(int index, long offsetBytes, ByteBuffer piece) {
                if (index != 2 || offsetBytes + piece.remaining() != PAGE) return piece; // the last piece, sent with the trailer
                ByteBuffer copy = ByteBuffer.allocateDirect(piece.remaining()).put(piece.duplicate()).flip();
                copy.put(7, (byte) (copy.get(7) ^ 0x01));
                return copy;
            }
        });
        List<PeerReadResult> results = join(reader.readBatch(candidates, NS));
        assertThat(results.get(2)).as("the remembered checksum is the pinned bytes', not the sent bytes'")
                .isEqualTo(new PeerReadResult.Miss(candidates.get(2), PeerReadResult.MissReason.DISCARDED));
        assertThat(releaseFetched(results)).isEqualTo(3);
        assertThat(requesterStore.dram().contains(candidates.get(2).key())).as("never a wrong hit").isFalse();
        assertThat(a.server.checksumsReused()).isEqualTo(8);
        a.awaitIdle();
        assertRequesterIdle();
    }

    /**
     * A bug that writes into a resident slot after its image was sent once: the next send's
     * trailer is the checksum remembered from the bytes first sent, so the requester refuses the
     * changed bytes (a checksum taken at that send would have vouched for them).
     */
    @Test
    void bytesChangedInAResidentSlotAfterAFirstSendAreRefusedByTheRequester() {
        StateKey k = key(620);
        byte[] payload = bytes(k);
        Reservation r = (Reservation) a.store.reserve(k, NS, payload.length);
        MemorySegment slot = r.segment(); // a view of the slot that outlives the reservation: the "bug"
        MemorySegment.copy(MemorySegment.ofArray(payload), 0, slot, 0, payload.length);
        PeerCandidate c = a.candidate(k, ((CommitResult.Inserted) a.store.commit(r)).imageId());
        assertThat(releaseFetched(join(reader.readBatch(List.of(c), NS)))).isEqualTo(1);
        requesterStore.dram().evict(k);

        slot.set(ValueLayout.JAVA_BYTE, 5, (byte) (slot.get(ValueLayout.JAVA_BYTE, 5) ^ 0x01));
        List<PeerReadResult> again = join(reader.readBatch(List.of(c), NS));
        assertThat(again.getFirst()).isEqualTo(new PeerReadResult.Miss(c, PeerReadResult.MissReason.DISCARDED));
        assertThat(requesterStore.dram().contains(k)).as("never a wrong hit").isFalse();
        assertThat(a.server.checksumsReused()).isEqualTo(1);
        a.awaitIdle();
        assertRequesterIdle();
    }

    @Test
    void aBugWhileServingABatchIsCountedAsTransportAndLeavesMissesAndNothingHeld() {
        List<PeerCandidate> candidates = put(a, 550, 8);
        a.server.hook(new BulkServer.SendHook() {
            @Override
            public void beforePage(int index) {
                if (index == 3) throw new IllegalStateException("injected: a bug before page 3");
            }
        });
        long before = UnexpectedErrors.count(UnexpectedErrors.Layer.TRANSPORT);
        List<PeerReadResult> results = join(reader.readBatch(candidates, NS));
        for (int i = 0; i < 3; i++) assertThat(results.get(i)).isInstanceOf(PeerReadResult.Fetched.class);
        for (int i = 3; i < 8; i++) {
            assertThat(results.get(i)).as("the connection closed as after a socket failure: a miss, never a wrong hit")
                    .isEqualTo(new PeerReadResult.Refused(candidates.get(i), AuthorizeResult.Rejection.UNREACHABLE));
        }
        assertThat(releaseFetched(results)).isEqualTo(3);
        await().atMost(Duration.ofSeconds(10)).until(() -> UnexpectedErrors.count(UnexpectedErrors.Layer.TRANSPORT) > before);
        a.awaitIdle();
        assertThat(a.tickets.expiredTotal()).as("freed by the source, not by the window").isZero();
        assertThat(a.server.sendQueueBytes()).isZero();
        assertRequesterIdle();
        a.server.hook(BulkServer.SendHook.NONE);
        assertThat(releaseFetched(join(reader.readBatch(candidates.subList(3, 8), NS)))).as("the source serves on").isEqualTo(5);
    }

    @Test
    void aSinkThatThrowsOnTheGrantIsADeclinedPageCountedAndTheConnectionServesOn() {
        List<PeerCandidate> candidates = put(a, 560, 3);
        List<AuthorizeRequest> requests = new ArrayList<>();
        List<PayloadTransport.FetchSink> sinks = new ArrayList<>();
        List<byte[]> received = new ArrayList<>();
        for (PeerCandidate cand : candidates) {
            requests.add(new AuthorizeRequest(B, cand.source().node().incarnation(), cand.key(), DIGEST, PeerMedium.DRAM,
                    cand.generation(), cand.residencySequence()));
            byte[] copy = new byte[PAGE];
            received.add(copy);
            int index = sinks.size();
            sinks.add(grant -> {
                if (index == 1) throw new IllegalStateException("injected: onGrant threw");
                return Optional.of(new CountingSink(copy, new AtomicInteger()));
            });
        }
        long before = UnexpectedErrors.count(UnexpectedErrors.Layer.TRANSPORT);
        List<PayloadTransport.FetchOutcome> outcomes = transport.fetchBatch(candidates.getFirst().source(), requests, sinks)
                .stream().map(f -> f.orTimeout(20, TimeUnit.SECONDS).join()).toList();
        assertThat(UnexpectedErrors.count(UnexpectedErrors.Layer.TRANSPORT) - before).isGreaterThanOrEqualTo(1);
        assertThat(outcomes.get(1)).isInstanceOf(PayloadTransport.FetchOutcome.Declined.class);
        for (int i : new int[] {0, 2}) {
            assertThat(outcomes.get(i)).isInstanceOfSatisfying(PayloadTransport.FetchOutcome.Streamed.class,
                    st -> assertThat(st.end()).isEqualTo(PayloadTransport.TransferEnd.COMPLETED));
            assertThat(received.get(i)).isEqualTo(bytes(candidates.get(i).key()));
        }
        a.awaitIdle();
        assertThat(transport.inflightBytes()).isZero();
    }

    @Test
    void aSourceClosedMidBatchLeavesMissesAndNothingHeldOnEitherSide() {
        List<PeerCandidate> candidates = put(a, 500, 15); // under two requests' worth: one request, one connection
        a.server.hook(new BulkServer.SendHook() {
            @Override
            public ByteBuffer piece(int index, long offsetBytes, ByteBuffer piece) {
                if (index == 5 && offsetBytes > 0) a.server.close(); // after the first piece of page 5 went out
                return piece;
            }
        });
        List<PeerReadResult> results = join(reader.readBatch(candidates, NS));
        for (int i = 0; i < 5; i++) assertThat(results.get(i)).isInstanceOf(PeerReadResult.Fetched.class);
        assertThat(results.get(5)).as("cut mid-payload")
                .isEqualTo(new PeerReadResult.Miss(candidates.get(5), PeerReadResult.MissReason.TRANSFER_BROKEN));
        for (int i = 6; i < 15; i++) {
            assertThat(results.get(i)).isEqualTo(new PeerReadResult.Refused(candidates.get(i), AuthorizeResult.Rejection.UNREACHABLE));
        }
        assertThat(releaseFetched(results)).isEqualTo(5);
        a.awaitIdle();
        assertThat(a.tickets.expiredTotal()).as("freed by the source, not by the window").isZero();
        assertRequesterIdle();
    }

    @Test
    void aMemberThatLeftEndsItsFetchesAtOnceInsteadOfAtTheDeadline() throws Exception {
        List<PeerCandidate> candidates = put(a, 600, 4);
        CountDownLatch frozen = new CountDownLatch(1);
        CountDownLatch stuck = new CountDownLatch(1);
        a.server.hook(new BulkServer.SendHook() {
            @Override
            public void beforePage(int index) {
                if (index != 2) return;
                stuck.countDown();
                try {
                    frozen.await(30, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        });
        List<CompletableFuture<PeerReadResult>> reads = reader.readBatch(candidates, NS);
        assertThat(stuck.await(10, TimeUnit.SECONDS)).isTrue();
        await().atMost(Duration.ofSeconds(10)).until(() -> reads.get(0).isDone() && reads.get(1).isDone());
        assertThat(reads.get(2)).as("the source is frozen before page 2").isNotDone();
        long before = System.nanoTime();
        transport.onMemberLeft(A);
        List<PeerReadResult> results = join(reads);
        long tookMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - before);
        assertThat(tookMillis).as("ended by the member-left hook, not the 10 s batch deadline").isLessThan(2_000);
        assertThat(releaseFetched(results)).isEqualTo(2);
        assertThat(results.get(2)).isInstanceOf(PeerReadResult.Refused.class);
        frozen.countDown();
        a.awaitIdle();
        assertRequesterIdle();
    }

    @Test
    void aMalformedFrameClosesOnlyItsConnectionAndTheSourceKeepsServing() throws Exception {
        BulkAuth auth = new BulkAuth(SECURITY);
        try (SocketChannel raw = SocketChannel.open(a.server.address())) {
            ByteBuffer hello = ByteBuffer.allocate(BulkLayout.HEADER_BYTES + BulkLayout.HELLO_BODY_BYTES);
            while (hello.hasRemaining()) raw.read(hello);
            hello.flip().position(BulkLayout.HEADER_BYTES + 4);
            byte[] serverNonce = new byte[BulkLayout.NONCE_BYTES];
            hello.get(serverNonce);
            byte[] clientNonce = BulkAuth.nonce();
            raw.write(new BulkLayout.Auth(clientNonce, auth.requesterMac(serverNonce, clientNonce)).encode());
            ByteBuffer ok = ByteBuffer.allocate(BulkLayout.HEADER_BYTES + BulkLayout.AUTH_OK_BODY_BYTES);
            while (ok.hasRemaining()) raw.read(ok);
            // a request announcing 4 GiB of body: refused from the header alone
            raw.write(BulkLayoutTest.rawHeader(BulkLayout.BATCH_REQUEST, 1, 0, 0xFFFF_FFF0L));
            ByteBuffer rest = ByteBuffer.allocate(64);
            int n;
            do {
                n = raw.read(rest);
            } while (n > 0);
            assertThat(n).as("the source closed the connection").isEqualTo(-1);
        }
        await().atMost(Duration.ofSeconds(10)).until(() -> a.server.malformedFrames() == 1);
        List<PeerCandidate> candidates = put(a, 700, 2);
        assertThat(releaseFetched(join(reader.readBatch(candidates, NS)))).isEqualTo(2);
        a.awaitIdle();
    }

    @Test
    void aPageOverTheRequestersInflightBoundIsRefusedBeforeAnySlotIsReserved() throws Exception {
        stop();
        open(BulkLimits.defaults().withInflight(PAGE - 1, PAGE - 1));
        List<PeerCandidate> candidates = put(a, 800, 2);
        List<PeerReadResult> results = join(reader.readBatch(candidates, NS));
        for (int i = 0; i < 2; i++) {
            assertThat(results.get(i)).isEqualTo(new PeerReadResult.Refused(candidates.get(i), AuthorizeResult.Rejection.SOURCE_BUSY));
        }
        assertThat(transport.inflightPeak()).isZero();
        a.awaitIdle();
        assertRequesterIdle();
    }

    @Test
    void aPageOverTheSourcesSendQueueIsRefusedAndItsTicketReleased() throws Exception {
        stop();
        open(BulkLimits.defaults().withSendQueueBytes(PAGE - 1));
        List<PeerCandidate> candidates = put(a, 850, 2);
        List<PeerReadResult> results = join(reader.readBatch(candidates, NS));
        for (int i = 0; i < 2; i++) {
            assertThat(results.get(i)).isEqualTo(new PeerReadResult.Refused(candidates.get(i), AuthorizeResult.Rejection.SOURCE_BUSY));
        }
        assertThat(a.server.sendQueuePeak()).isZero();
        a.awaitIdle();
        assertThat(a.tickets.expiredTotal()).isZero();
        assertRequesterIdle();
    }
}
