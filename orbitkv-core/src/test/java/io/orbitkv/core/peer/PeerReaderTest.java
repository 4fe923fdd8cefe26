package io.orbitkv.core.peer;

import io.orbitkv.state.StateKey;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The requester's workflow against real stores on both sides, joined by {@link InMemoryTransport}:
 * bit-identical remote hits, corrupted or broken payloads discarded (a miss, never a wrong hit),
 * releases retried, and batch replanning that drops only the refusing owner.
 */
class PeerReaderTest {

    static final NodeIncarnation A = new NodeIncarnation("a", 1);
    static final NodeIncarnation B = new NodeIncarnation("b", 1);
    static final NodeIncarnation C = new NodeIncarnation("c", 1);

    @TempDir
    Path dir;

    final PeerNode.Members members = new PeerNode.Members();
    final InMemoryTransport transport = new InMemoryTransport();
    PeerNode a;
    PeerNode b;
    PeerNode c;
    ReleaseRetrier releases;
    PeerReader reader;

    @BeforeEach
    void open() throws Exception {
        members.live.put("a", A);
        members.live.put("b", B);
        members.live.put("c", C);
        a = new PeerNode(dir, A, members, 8);
        b = new PeerNode(dir, B, members, 8);
        c = new PeerNode(dir, C, members, 8);
        transport.add(a);
        transport.add(c);
        releases = new ReleaseRetrier(transport, 16, 4, 100, 800);
        reader = new PeerReader(B, b.store.dram(), members, transport, releases, b.clock::get);
    }

    @AfterEach
    void close() {
        a.close();
        b.close();
        c.close();
    }

    void assertNothingLeaked() {
        assertThat(a.tickets.size()).isZero();
        assertThat(c.tickets.size()).isZero();
        assertThat(a.store.dram().usage().leases()).isZero();
        assertThat(c.store.dram().usage().leases()).isZero();
        assertThat(b.store.dram().usage().reservedBytes()).isZero();
        assertThat(releases.pending()).isZero();
    }

    @Test
    void remoteHitIsBitIdenticalAndReleasesTheTicket() {
        StateKey k = PeerNode.key(1);
        long gen = a.putInDram(k);
        PeerReadResult r = reader.read(a.dramCandidate(k, gen), PeerNode.NS).join();
        PeerReadResult.Fetched f = (PeerReadResult.Fetched) r;
        assertThat(PeerNode.read(f.lease().segment())).isEqualTo(PeerNode.bytesOf(k));
        f.lease().release();
        assertThat(b.store.dram().contains(k)).isTrue();
        assertNothingLeaked();
    }

    @Test
    void pageAlreadyResidentLocallyIsNotStreamedButItsTicketIsReleased() {
        StateKey k = PeerNode.key(11);
        long gen = a.putInDram(k);
        PeerReadResult.Fetched first = (PeerReadResult.Fetched) reader.read(a.dramCandidate(k, gen), PeerNode.NS).join();
        first.lease().release();
        int releasesBefore = transport.releaseCalls.get();

        PeerReadResult.Fetched again = (PeerReadResult.Fetched) reader.read(a.dramCandidate(k, gen), PeerNode.NS).join();
        assertThat(PeerNode.read(again.lease().segment())).isEqualTo(PeerNode.bytesOf(k));
        again.lease().release();
        assertThat(transport.releaseCalls.get()).as("the default fetch owes a release even when declined")
                .isEqualTo(releasesBefore + 1);
        assertNothingLeaked();
    }

    @Test
    void aTransportWhoseSourceFreesTheTicketGetsNoReleaseCall() {
        // Like the gRPC Fetch: the source releases at stream end and the outcome owes nothing.
        AtomicInteger owedReleases = new AtomicInteger();
        PayloadTransport selfReleasing = new PayloadTransport() {
            @Override
            public CompletableFuture<FetchOutcome> fetch(PeerEndpoint source, AuthorizeRequest request, FetchSink receiver) {
                return PayloadTransport.super.fetch(source, request, receiver).thenApply(outcome -> switch (outcome) {
                    case FetchOutcome.Rejected r -> r;
                    case FetchOutcome.Declined d -> {
                        a.source.release(d.grant().ticketId(), request.requester());
                        yield new FetchOutcome.Declined(d.grant(), false);
                    }
                    case FetchOutcome.Streamed st -> {
                        a.source.release(st.grant().ticketId(), request.requester());
                        yield new FetchOutcome.Streamed(st.grant(), st.end(), false);
                    }
                });
            }

            @Override
            public CompletableFuture<AuthorizeResult> authorize(PeerEndpoint source, AuthorizeRequest request) {
                return transport.authorize(source, request);
            }

            @Override
            public CompletableFuture<TransferEnd> transfer(PeerEndpoint source, AuthorizeResult.Granted ticket,
                                                           NodeIncarnation requester, PayloadSink sink) {
                return transport.transfer(source, ticket, requester, sink);
            }

            @Override
            public CompletableFuture<ReleaseAck> release(PeerEndpoint source, long ticketId, NodeIncarnation requester) {
                owedReleases.incrementAndGet();
                return CompletableFuture.completedFuture(ReleaseAck.ACKED);
            }
        };
        PeerReader direct = new PeerReader(B, b.store.dram(), members, selfReleasing, releases, b.clock::get);
        StateKey k = PeerNode.key(12);
        long gen = a.putInDram(k);
        PeerReadResult.Fetched f = (PeerReadResult.Fetched) direct.read(a.dramCandidate(k, gen), PeerNode.NS).join();
        assertThat(PeerNode.read(f.lease().segment())).isEqualTo(PeerNode.bytesOf(k));
        f.lease().release();
        assertThat(owedReleases.get()).as("no release is owed").isZero();
        assertThat(releases.ackedTotal()).isZero();
        assertNothingLeaked();
    }

    @Test
    void corruptedChunkIsDiscardedNotCommitted() {
        StateKey k = PeerNode.key(2);
        long gen = a.putInDram(k);
        transport.corruptChunk = 1;
        PeerReadResult r = reader.read(a.dramCandidate(k, gen), PeerNode.NS).join();
        assertThat(r).isEqualTo(new PeerReadResult.Miss(a.dramCandidate(k, gen), PeerReadResult.MissReason.DISCARDED));
        assertThat(b.store.dram().contains(k)).as("corrupt payload must not become resident").isFalse();
        assertNothingLeaked();
    }

    @Test
    void brokenStreamIsAMissAndFreesTheSlot() {
        StateKey k = PeerNode.key(3);
        long gen = a.putInDram(k);
        transport.breakAfterChunks = 2;
        PeerReadResult r = reader.read(a.dramCandidate(k, gen), PeerNode.NS).join();
        assertThat(r).isInstanceOf(PeerReadResult.Miss.class);
        assertThat(((PeerReadResult.Miss) r).reason()).isEqualTo(PeerReadResult.MissReason.TRANSFER_BROKEN);
        assertThat(b.store.dram().contains(k)).isFalse();
        assertNothingLeaked();
    }

    @Test
    void lostReleasesAreRetriedWithBackoffUntilAcknowledged() {
        StateKey k = PeerNode.key(4);
        long gen = a.putInDram(k);
        transport.failReleases.set(2);
        PeerReadResult.Fetched f = (PeerReadResult.Fetched) reader.read(a.dramCandidate(k, gen), PeerNode.NS).join();
        f.lease().release();
        assertThat(a.tickets.size()).as("first release lost").isEqualTo(1);
        long now = b.clock.get();
        assertThat(releases.onTick(now + 99)).as("not before the backoff").isZero();
        assertThat(releases.onTick(now + 100)).isEqualTo(1);
        assertThat(a.tickets.size()).as("second release lost").isEqualTo(1);
        assertThat(releases.onTick(now + 100 + 199)).isZero();
        assertThat(releases.onTick(now + 100 + 200)).isEqualTo(1);
        assertThat(transport.releaseCalls.get()).isEqualTo(3);
        assertNothingLeaked();
    }

    @Test
    void releaseGivenUpIsFreedByTheSourceWindow() {
        StateKey k = PeerNode.key(5);
        long gen = a.putInDram(k);
        transport.failReleases.set(100);
        PeerReadResult.Fetched f = (PeerReadResult.Fetched) reader.read(a.dramCandidate(k, gen), PeerNode.NS).join();
        f.lease().release();
        long now = b.clock.get();
        for (int i = 1; i <= 10; i++) releases.onTick(now + i * 1_000L);
        assertThat(releases.pending()).isZero();
        assertThat(releases.abandonedTotal()).isEqualTo(1);
        assertThat(a.tickets.size()).isEqualTo(1);
        a.clock.addAndGet(java.util.concurrent.TimeUnit.SECONDS.toNanos(31));
        assertThat(a.source.onTick()).isEqualTo(1);
        assertNothingLeaked();
    }

    @Test
    void invalidMembershipStartsNoRemoteWork() {
        StateKey k = PeerNode.key(6);
        long gen = a.putInDram(k);
        members.valid = false;
        PeerReadResult r = reader.read(a.dramCandidate(k, gen), PeerNode.NS).join();
        assertThat(r).isEqualTo(new PeerReadResult.Miss(a.dramCandidate(k, gen), PeerReadResult.MissReason.MEMBERSHIP_INVALID));
        assertThat(transport.releaseCalls.get()).isZero();
    }

    @Test
    void ownerWideRefusalDropsThatOwnerOnlyAndReplansWithinTheBatch() {
        StateKey k1 = PeerNode.key(7);
        StateKey k2 = PeerNode.key(8);
        long a1 = a.putInDram(k1);
        long a2 = a.putInDram(k2);
        long c1 = c.putInDram(k1);
        long c2 = c.putInDram(k2);
        // The planner's evidence about a names an incarnation a no longer has: a refuses every page.
        PeerCandidate staleA1 = new PeerCandidate(new PeerEndpoint(new NodeIncarnation("a", 0 + 1), "mem:a"), k1,
                PeerNode.DIGEST, PeerMedium.DRAM, a1, a.store.residency().lastSequence());
        members.live.put("a", new NodeIncarnation("a", 1));
        PeerSource restartedA = new PeerSource(new NodeIncarnation("a", 2), a.store, a.namespaces, members, a.tickets, a.clock::get);
        transport.add("mem:a", restartedA);
        PeerCandidate staleA2 = new PeerCandidate(staleA1.source(), k2, PeerNode.DIGEST, PeerMedium.DRAM, a2,
                a.store.residency().lastSequence());

        List<ReadPlan> plans = List.of(
                new ReadPlan(k1, false, false, List.of(staleA1, c.dramCandidate(k1, c1))),
                new ReadPlan(k2, false, false, List.of(c.dramCandidate(k2, c2), staleA2)));
        PeerReader.Batch batch = reader.readAll(plans, PeerNode.NS).join();

        List<PeerReader.Batch.Entry> entries = batch.entries();
        for (int i = 0; i < 2; i++) {
            PeerReadResult.Fetched f = (PeerReadResult.Fetched) entries.get(i).result().orElseThrow();
            assertThat(f.from().ownerId()).isEqualTo("c");
            assertThat(PeerNode.read(f.lease().segment())).isEqualTo(PeerNode.bytesOf(List.of(k1, k2).get(i)));
            f.lease().release();
            assertThat(entries.get(i).plan().peers()).noneMatch(p -> p.ownerId().equals("a"));
        }
        assertNothingLeaked();
    }

    @Test
    void perPageRefusalKeepsTheOwnerForOtherPages() {
        StateKey k1 = PeerNode.key(9);
        StateKey k2 = PeerNode.key(10);
        long a1 = a.putInDram(k1);
        long a2 = a.putInDram(k2);
        PeerCandidate goneA1 = a.dramCandidate(k1, a1 + 999);
        List<ReadPlan> plans = List.of(new ReadPlan(k1, false, false, List.of(goneA1)),
                new ReadPlan(k2, false, false, List.of(a.dramCandidate(k2, a2))));
        List<PeerReader.Batch.Entry> entries = reader.readAll(plans, PeerNode.NS).join().entries();
        assertThat(entries.get(0).result().orElseThrow())
                .isEqualTo(new PeerReadResult.Refused(goneA1, AuthorizeResult.Rejection.GENERATION_GONE));
        PeerReadResult.Fetched f = (PeerReadResult.Fetched) entries.get(1).result().orElseThrow();
        f.lease().release();
        assertNothingLeaked();
    }

    @Test
    void routeOrderIsLocalDramLocalSsdPeerDramPeerSsd() {
        StateKey k = PeerNode.key(11);
        PeerCandidate ssdAtA = new PeerCandidate(new PeerEndpoint(A, "mem:a"), k, PeerNode.DIGEST, PeerMedium.SSD, 1, 1);
        PeerCandidate dramAtC = new PeerCandidate(new PeerEndpoint(C, "mem:c"), k, PeerNode.DIGEST, PeerMedium.DRAM, 1, 1);
        ReadPlan plan = new ReadPlan(k, false, false, List.of(ssdAtA, dramAtC));
        assertThat(plan.peers()).containsExactly(dramAtC, ssdAtA);
        assertThat(plan.firstRoute()).contains(ReadRoute.PEER_DRAM);
        assertThat(new ReadPlan(k, false, true, List.of(dramAtC)).firstRoute()).contains(ReadRoute.LOCAL_SSD);
        assertThat(new ReadPlan(k, true, true, List.of(dramAtC)).firstRoute()).contains(ReadRoute.LOCAL_DRAM);
        assertThat(plan.withoutOwner("c").firstRoute()).contains(ReadRoute.PEER_SSD);
        assertThat(plan.withoutOwner("c").withoutOwner("a").firstRoute()).isEmpty();
    }
}
