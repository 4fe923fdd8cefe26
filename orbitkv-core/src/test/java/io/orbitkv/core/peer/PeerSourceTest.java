package io.orbitkv.core.peer;

import io.orbitkv.core.peer.AuthorizeResult.Rejection;
import io.orbitkv.core.storage.publish.PageSource;
import io.orbitkv.core.storage.publish.PublishResult;
import io.orbitkv.core.storage.publish.SsdAdmissionPolicy;
import io.orbitkv.core.storage.ssd.Pin;
import io.orbitkv.state.StateKey;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.time.Duration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/** Authorization at the source: every refusal pins nothing, a grant pins exactly one lease. */
class PeerSourceTest {

    static final NodeIncarnation A = new NodeIncarnation("a", 5);
    static final NodeIncarnation B = new NodeIncarnation("b", 2);

    @TempDir
    Path dir;

    final PeerNode.Members members = new PeerNode.Members();
    PeerNode a;

    @BeforeEach
    void open() throws Exception {
        members.live.put("a", A);
        members.live.put("b", B);
        a = new PeerNode(dir, A, members, 8);
    }

    @AfterEach
    void close() {
        a.close();
    }

    AuthorizeRequest request(StateKey key, long generation) {
        return new AuthorizeRequest(B, A.incarnation(), key, PeerNode.DIGEST, PeerMedium.DRAM, generation,
                a.store.residency().lastSequence());
    }

    Rejection rejection(AuthorizeRequest request) {
        AuthorizeResult r = a.source.authorize(request).join();
        assertThat(r).isInstanceOf(AuthorizeResult.Rejected.class);
        assertThat(a.store.dram().usage().leases()).as("a refusal leaves nothing pinned").isZero();
        assertThat(a.tickets.size()).isZero();
        return ((AuthorizeResult.Rejected) r).reason();
    }

    @Test
    void grantPinsTheExactGenerationUntilReleased() {
        StateKey k = PeerNode.key(1);
        long gen = a.putInDram(k);
        AuthorizeResult.Granted g = (AuthorizeResult.Granted) a.source.authorize(request(k, gen)).join();
        assertThat(g.lengthBytes()).isEqualTo(PeerNode.PAGE);
        assertThat(g.sourceIncarnation()).isEqualTo(A.incarnation());
        assertThat(a.store.dram().usage().leases()).isEqualTo(1);

        a.store.dram().evict(k);
        TicketTable.BeginResult.Reading reading = (TicketTable.BeginResult.Reading) a.source.beginTransfer(g.ticketId(), B);
        assertThat(PeerNode.read(reading.image().payload())).as("evicted but pinned bytes stay intact")
                .isEqualTo(PeerNode.bytesOf(k));
        a.source.endTransfer(g.ticketId());
        assertThat(a.source.release(g.ticketId(), B)).isEqualTo(TicketTable.ReleaseOutcome.FREED);
        assertThat(a.store.dram().usage().leases()).isZero();
    }

    @Test
    void staleSourceIncarnationIsRejected() {
        StateKey k = PeerNode.key(2);
        long gen = a.putInDram(k);
        AuthorizeRequest r = request(k, gen);
        assertThat(rejection(new AuthorizeRequest(B, A.incarnation() - 1, k, PeerNode.DIGEST, PeerMedium.DRAM, gen,
                r.residencySequence()))).isEqualTo(Rejection.STALE_SOURCE_INCARNATION);
    }

    @Test
    void requesterIncarnationNotLiveIsRejected() {
        StateKey k = PeerNode.key(3);
        long gen = a.putInDram(k);
        members.live.put("b", new NodeIncarnation("b", 3));
        assertThat(rejection(request(k, gen))).isEqualTo(Rejection.STALE_REQUESTER_INCARNATION);
        members.live.remove("b");
        assertThat(rejection(request(k, gen))).isEqualTo(Rejection.STALE_REQUESTER_INCARNATION);
    }

    @Test
    void sequenceAheadOfTheSourceIsRejected() {
        StateKey k = PeerNode.key(4);
        long gen = a.putInDram(k);
        AuthorizeRequest r = request(k, gen);
        assertThat(rejection(new AuthorizeRequest(B, A.incarnation(), k, PeerNode.DIGEST, PeerMedium.DRAM, gen,
                r.residencySequence() + 1))).isEqualTo(Rejection.SEQUENCE_AHEAD);
    }

    @Test
    void unknownOrOtherNamespaceIsRejected() {
        StateKey k = PeerNode.key(5);
        long gen = a.putInDram(k);
        long seq = a.store.residency().lastSequence();
        assertThat(rejection(new AuthorizeRequest(B, A.incarnation(), k, PeerNode.OTHER_DIGEST, PeerMedium.DRAM, gen, seq)))
                .isEqualTo(Rejection.NAMESPACE_MISMATCH);
        a.namespaces.register(9, PeerNode.OTHER_DIGEST);
        assertThat(rejection(new AuthorizeRequest(B, A.incarnation(), k, PeerNode.OTHER_DIGEST, PeerMedium.DRAM, gen, seq)))
                .as("known namespace, but the page is in another one: that namespace holds no such page")
                .isEqualTo(Rejection.GENERATION_GONE);
    }

    @Test
    void generationGoneIsRejected() {
        StateKey k = PeerNode.key(6);
        long gen = a.putInDram(k);
        assertThat(rejection(request(k, gen + 1000))).isEqualTo(Rejection.GENERATION_GONE);
        a.store.dram().evict(k);
        assertThat(rejection(request(k, gen))).isEqualTo(Rejection.GENERATION_GONE);
        assertThat(rejection(new AuthorizeRequest(B, A.incarnation(), k, PeerNode.DIGEST, PeerMedium.SSD, 12345,
                a.store.residency().lastSequence()))).isEqualTo(Rejection.GENERATION_GONE);
    }

    @Test
    void currentGenerationPinsWhateverImageIsResidentAndStillRefusesAMiss() {
        StateKey k = PeerNode.key(8);
        long gen = a.putInDram(k);
        AuthorizeResult r = a.source.authorize(request(k, AuthorizeRequest.CURRENT_GENERATION)).join();
        assertThat(r).isInstanceOf(AuthorizeResult.Granted.class);
        assertThat(a.store.dram().usage().leases()).as("the current image is pinned").isEqualTo(1);
        assertThat(a.source.release(((AuthorizeResult.Granted) r).ticketId(), B)).isEqualTo(TicketTable.ReleaseOutcome.FREED);
        assertThat(a.store.dram().usage().leases()).isZero();
        assertThat(gen).isPositive();
        assertThat(rejection(request(PeerNode.key(9), AuthorizeRequest.CURRENT_GENERATION)))
                .as("no image of an absent key").isEqualTo(Rejection.GENERATION_GONE);
        assertThat(rejection(new AuthorizeRequest(B, A.incarnation(), k, PeerNode.DIGEST, PeerMedium.DRAM,
                AuthorizeRequest.CURRENT_GENERATION, a.store.residency().lastSequence() + 1)))
                .as("the residency sequence is still checked").isEqualTo(Rejection.SEQUENCE_AHEAD);
    }

    @Test
    void invalidMembershipStopsServing() {
        StateKey k = PeerNode.key(7);
        long gen = a.putInDram(k);
        members.valid = false;
        assertThat(rejection(request(k, gen))).isEqualTo(Rejection.NOT_SERVING);
    }

    @Test
    void fullTicketTableRefusesAndUnpins() throws Exception {
        try (PeerNode small = new PeerNode(dir.resolve("small"), new NodeIncarnation("s", 1), members, 8)) {
            PeerSource tiny = new PeerSource(small.self, small.store, small.namespaces, members,
                    new TicketTable(1, 1_000_000), small.clock::get);
            StateKey k1 = PeerNode.key(8);
            StateKey k2 = PeerNode.key(9);
            long g1 = small.putInDram(k1);
            long g2 = small.putInDram(k2);
            long seq = small.store.residency().lastSequence();
            assertThat(tiny.authorize(new AuthorizeRequest(B, 1, k1, PeerNode.DIGEST, PeerMedium.DRAM, g1, seq)).join())
                    .isInstanceOf(AuthorizeResult.Granted.class);
            assertThat(tiny.authorize(new AuthorizeRequest(B, 1, k2, PeerNode.DIGEST, PeerMedium.DRAM, g2, seq)).join())
                    .isEqualTo(new AuthorizeResult.Rejected(Rejection.TICKET_TABLE_FULL));
            assertThat(small.store.dram().usage().leases()).isEqualTo(1);
        }
    }

    @Test
    void aRestartedSourceServesItsRecoveredSsdPagesBeforeAnyEngineRegistersTheirNamespace() throws Exception {
        StateKey k = PeerNode.key(11);
        try (PeerNode before = new PeerNode(dir.resolve("restart"), new NodeIncarnation("s", 1), members, 8,
                new SsdAdmissionPolicy.WriteThrough())) {
            var page = PeerNode.offHeap(PeerNode.bytesOf(k));
            assertThat(before.store.publish(k, PeerNode.NS, PageSource.weak(page, PeerNode.PAGE)))
                    .isInstanceOf(PublishResult.Queued.class);
            await().atMost(Duration.ofSeconds(10)).until(() -> before.store.ssd().contains(k));
            java.lang.ref.Reference.reachabilityFence(page);
            await().atMost(Duration.ofSeconds(10)).until(() -> before.store.dram().usage().leases() == 0);
        }
        try (PeerNode s = new PeerNode(dir.resolve("restart"), new NodeIncarnation("s", 2), members, 8,
                new SsdAdmissionPolicy.WriteThrough(), false)) {
            assertThat(s.store.ssd().contains(k)).as("recovered").isTrue();
            assertThat(s.namespaces.id(PeerNode.DIGEST)).as("no engine registered yet").isEmpty();
            long seq = s.store.residency().lastSequence();
            AuthorizeResult other = s.source.authorize(new AuthorizeRequest(B, 2, k, PeerNode.OTHER_DIGEST, PeerMedium.SSD,
                    AuthorizeRequest.CURRENT_GENERATION, seq)).join();
            assertThat(other).as("no extent of that namespace").isEqualTo(new AuthorizeResult.Rejected(Rejection.GENERATION_GONE));
            assertThat(s.namespaces.id(PeerNode.OTHER_DIGEST)).as("a digest no extent carries is never bound").isEmpty();

            AuthorizeResult r = s.source.authorize(new AuthorizeRequest(B, 2, k, PeerNode.DIGEST, PeerMedium.SSD,
                    AuthorizeRequest.CURRENT_GENERATION, seq)).join();
            assertThat(r).as("the extent's digest is the proof").isInstanceOf(AuthorizeResult.Granted.class);
            long id = ((AuthorizeResult.Granted) r).ticketId();
            TicketTable.BeginResult.Reading reading = (TicketTable.BeginResult.Reading) s.source.beginTransfer(id, B);
            assertThat(PeerNode.read(reading.image().payload())).isEqualTo(PeerNode.bytesOf(k));
            s.source.endTransfer(id);
            assertThat(s.source.release(id, B)).isEqualTo(TicketTable.ReleaseOutcome.FREED);
            assertThat(s.namespaces.id(PeerNode.DIGEST)).as("bound on demand").isPresent();
            await().atMost(Duration.ofSeconds(10)).until(() -> s.store.dram().usage().leases() == 0);
        }
    }

    @Test
    void ssdPageIsStagedIntoSourceDramBeforeGrant() throws Exception {
        try (PeerNode s = new PeerNode(dir.resolve("ssd"), new NodeIncarnation("s", 1), members, 8,
                new SsdAdmissionPolicy.WriteThrough())) {
            StateKey k = PeerNode.key(10);
            // the page stays strongly reachable until sealed: a weak source collected first is dropped by design
            var page = PeerNode.offHeap(PeerNode.bytesOf(k));
            assertThat(s.store.publish(k, PeerNode.NS, PageSource.weak(page, PeerNode.PAGE)))
                    .isInstanceOf(PublishResult.Queued.class);
            await().atMost(Duration.ofSeconds(10)).until(() -> s.store.ssd().contains(k));
            java.lang.ref.Reference.reachabilityFence(page);
            await().atMost(Duration.ofSeconds(10)).until(() -> s.store.dram().usage().leases() == 0);
            assertThat(s.store.dram().evict(k)).isTrue();
            long ssdGeneration;
            try (Pin pin = (Pin) s.store.ssd().pin(k, PeerNode.DIGEST)) {
                ssdGeneration = pin.generation();
            }
            AuthorizeResult r = s.source.authorize(new AuthorizeRequest(B, 1, k, PeerNode.DIGEST, PeerMedium.SSD,
                    ssdGeneration, s.store.residency().lastSequence())).join();
            assertThat(r).isInstanceOf(AuthorizeResult.Granted.class);
            assertThat(s.store.dram().contains(k)).as("staged into the source's DRAM").isTrue();
            assertThat(s.store.ssd().readerPins()).as("the transfer reads DRAM, not the extent").isZero();
            long id = ((AuthorizeResult.Granted) r).ticketId();
            TicketTable.BeginResult.Reading reading = (TicketTable.BeginResult.Reading) s.source.beginTransfer(id, B);
            assertThat(PeerNode.read(reading.image().payload())).isEqualTo(PeerNode.bytesOf(k));
            s.source.endTransfer(id);
            assertThat(s.source.release(id, B)).isEqualTo(TicketTable.ReleaseOutcome.FREED);
            // the staging's own anchor lease is released by its finishing thread just after the grant's future completes
            await().atMost(Duration.ofSeconds(10)).until(() -> s.store.dram().usage().leases() == 0);
        }
    }
}
