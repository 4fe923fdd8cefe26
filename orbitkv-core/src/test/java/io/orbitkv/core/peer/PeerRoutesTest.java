package io.orbitkv.core.peer;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.core.catalog.Member;
import io.orbitkv.core.catalog.MembershipView;
import io.orbitkv.core.query.SessionScope;
import io.orbitkv.core.storage.StageResult;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.StateKey;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The peer duties on the Manager's tick: a requester that left (or restarted) loses its tickets
 * at the next tick after the view changed; ticket windows expire on the tick; the status counts
 * tickets and whether remote work is allowed (own registration in a valid view).
 */
class PeerRoutesTest {

    static final NodeIncarnation A = new NodeIncarnation("a", 5);
    static final NodeIncarnation B = new NodeIncarnation("b", 2);

    /** Acknowledges releases; never used for reads here. */
    static final PayloadTransport ACKING = new PayloadTransport() {
        @Override
        public CompletableFuture<AuthorizeResult> authorize(PeerEndpoint source, AuthorizeRequest request) {
            return CompletableFuture.completedFuture(new AuthorizeResult.Rejected(AuthorizeResult.Rejection.UNREACHABLE));
        }

        @Override
        public CompletableFuture<TransferEnd> transfer(PeerEndpoint source, AuthorizeResult.Granted ticket,
                                                       NodeIncarnation requester, PayloadSink sink) {
            return CompletableFuture.completedFuture(TransferEnd.BROKEN);
        }

        @Override
        public CompletableFuture<ReleaseAck> release(PeerEndpoint source, long ticketId, NodeIncarnation requester) {
            return CompletableFuture.completedFuture(ReleaseAck.ACKED);
        }
    };

    @TempDir
    Path dir;

    final AtomicReference<MembershipView> view = new AtomicReference<>(MembershipView.valid(
            List.of(new Member("a", "127.0.0.1:1", 5), new Member("b", "127.0.0.1:2", 2)), 1));
    PeerNode a;
    PeerSource source;
    PeerRoutes routes;

    @BeforeEach
    void open() throws Exception {
        MembershipMembers members = new MembershipMembers(view::get, A);
        a = new PeerNode(dir, A, new PeerNode.Members(), 8);
        PeerSource source = new PeerSource(A, a.store, a.namespaces, members, a.tickets, a.clock::get);
        ReleaseRetrier releases = new ReleaseRetrier(ACKING, 16, 3, 1_000, 10_000);
        PeerReader reader = new PeerReader(A, a.store.dram(), members, ACKING, releases, a.clock::get);
        PeerPages pages = new PeerPages((k, ns) -> List.of(), reader, members, PeerNode.SLOT);
        routes = new PeerRoutes(pages, source, releases, view::get, members);
        this.source = source;
    }

    @AfterEach
    void close() {
        a.close();
    }

    long grant(long key) {
        a.putInDram(PeerNode.key(key));
        AuthorizeResult r = source.authorize(new AuthorizeRequest(B, A.incarnation(), PeerNode.key(key), PeerNode.DIGEST,
                PeerMedium.DRAM, AuthorizeRequest.CURRENT_GENERATION, a.store.residency().lastSequence())).join();
        assertThat(r).isInstanceOf(AuthorizeResult.Granted.class);
        return ((AuthorizeResult.Granted) r).ticketId();
    }

    @Test
    void aRequesterThatRestartedLosesItsTicketsAtTheNextTick() {
        routes.onTick(a.clock.get());
        grant(1);
        grant(2);
        assertThat(routes.status().tickets()).isEqualTo(2);
        routes.onTick(a.clock.get());
        assertThat(routes.status().tickets()).as("no membership change: tickets stay").isEqualTo(2);
        view.set(MembershipView.valid(List.of(new Member("a", "127.0.0.1:1", 5), new Member("b", "127.0.0.1:2", 3)), 2));
        routes.onTick(a.clock.get());
        assertThat(routes.status().tickets()).as("b#2 is gone").isZero();
        assertThat(a.store.dram().usage().leases()).as("pins released").isZero();
    }

    @Test
    void aRequesterThatLeftLosesItsTickets() {
        routes.onTick(a.clock.get());
        grant(3);
        view.set(MembershipView.valid(List.of(new Member("a", "127.0.0.1:1", 5)), 2));
        routes.onTick(a.clock.get());
        assertThat(routes.status().tickets()).isZero();
    }

    @Test
    void ticketWindowsExpireOnTheTick() {
        grant(4);
        a.clock.addAndGet(TimeUnit.SECONDS.toNanos(31));
        routes.onTick(a.clock.get());
        assertThat(routes.status().tickets()).isZero();
        assertThat(routes.status().ticketsExpired()).isEqualTo(1);
    }

    @Test
    void aTransportThatCannotStartACallIsAMissAndTheFetchIsNotLeft() {
        PayloadTransport closed = new PayloadTransport() {
            @Override
            public CompletableFuture<AuthorizeResult> authorize(PeerEndpoint source, AuthorizeRequest request) {
                throw new IllegalStateException("cluster channels are closed");
            }

            @Override
            public CompletableFuture<TransferEnd> transfer(PeerEndpoint source, AuthorizeResult.Granted ticket,
                                                           NodeIncarnation requester, PayloadSink sink) {
                throw new IllegalStateException("cluster channels are closed");
            }

            @Override
            public CompletableFuture<ReleaseAck> release(PeerEndpoint source, long ticketId, NodeIncarnation requester) {
                throw new IllegalStateException("cluster channels are closed");
            }
        };
        MembershipMembers members = new MembershipMembers(view::get, A);
        ReleaseRetrier releases = new ReleaseRetrier(closed, 16, 3, 1_000, 10_000);
        PeerReader reader = new PeerReader(A, a.store.dram(), members, closed, releases, a.clock::get);
        StateKey key = PeerNode.key(11);
        PeerCandidate fromB = new PeerCandidate(new PeerEndpoint(B, "127.0.0.1:2"), key, PeerNode.DIGEST, PeerMedium.DRAM,
                AuthorizeRequest.CURRENT_GENERATION, 1);
        PeerRoutes routes = new PeerRoutes(new PeerPages((k, ns) -> List.of(fromB), reader, members, PeerNode.SLOT),
                source, releases, view::get, members);
        Namespace ns = new Namespace("peer-routes", "r1", "sha256:w", "sha256:t", "", "bf16", "nhd", 16, 1, 0, 1, 0, 1);
        SessionScope scope = new SessionScope(ns, PeerNode.NS, new RecoveryContract(16, List.of(new StateGroup.Full(0))));
        assertThat(routes.stagingBytes(key, scope)).isEqualTo(PeerNode.SLOT);
        assertThat(routes.fetch(key, scope).join()).isInstanceOf(StageResult.Miss.class);
        assertThat(routes.status().fetchesInFlight()).isZero();
        assertThat(routes.status().fetchesMissed()).isEqualTo(1);
    }

    @Test
    void aPeerPageIsChargedItsPaddedLengthAndTheLargestSlotOnlyWhenTheLengthIsUnknown() {
        MembershipMembers members = new MembershipMembers(view::get, A);
        ReleaseRetrier releases = new ReleaseRetrier(ACKING, 16, 3, 1_000, 10_000);
        PeerReader reader = new PeerReader(A, a.store.dram(), members, ACKING, releases, a.clock::get);
        StateKey key = PeerNode.key(12);
        PeerEndpoint b = new PeerEndpoint(B, "127.0.0.1:2");
        Namespace ns = new Namespace("peer-routes", "r1", "sha256:w", "sha256:t", "", "bf16", "nhd", 16, 1, 0, 1, 0, 1);
        SessionScope scope = new SessionScope(ns, PeerNode.NS, new RecoveryContract(16, List.of(new StateGroup.Full(0))));
        PeerCandidate sized = new PeerCandidate(b, key, PeerNode.DIGEST, PeerMedium.SSD, AuthorizeRequest.CURRENT_GENERATION, 1, 5_000);
        PeerCandidate unsized = new PeerCandidate(b, key, PeerNode.DIGEST, PeerMedium.DRAM, AuthorizeRequest.CURRENT_GENERATION, 1);
        assertThat(new PeerPages((k, ns2) -> List.of(sized), reader, members, PeerNode.SLOT).stagingBytes(key, scope))
                .as("5,000 bytes padded to whole 4 KiB blocks, not the 64 KiB slot").isEqualTo(8_192);
        assertThat(new PeerPages((k, ns2) -> List.of(unsized), reader, members, PeerNode.SLOT).stagingBytes(key, scope))
                .as("old evidence without a length").isEqualTo(PeerNode.SLOT);
        assertThat(new PeerPages((k, ns2) -> List.of(sized, unsized), reader, members, PeerNode.SLOT).stagingBytes(key, scope))
                .as("the largest charge of the candidates a fetch may use").isEqualTo(PeerNode.SLOT);
        assertThat(new PeerPages((k, ns2) -> List.of(), reader, members, PeerNode.SLOT).stagingBytes(key, scope)).isZero();
    }

    @Test
    void remoteWorkNeedsOwnRegistrationInAValidView() {
        assertThat(routes.status().remoteWorkAllowed()).isTrue();
        view.set(MembershipView.valid(List.of(new Member("a", "127.0.0.1:1", 6)), 3));
        assertThat(routes.status().remoteWorkAllowed()).as("a newer incarnation of a registered").isFalse();
        view.set(MembershipView.valid(List.of(new Member("a", "127.0.0.1:1", 5)), 4).invalidate("etcd down"));
        assertThat(routes.status().remoteWorkAllowed()).isFalse();
    }
}
