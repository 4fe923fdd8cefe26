package io.orbitkv.core.engine;

import io.orbitkv.core.peer.InMemoryTransport;
import io.orbitkv.core.peer.MemberView;
import io.orbitkv.core.peer.NodeIncarnation;
import io.orbitkv.core.peer.PeerCandidate;
import io.orbitkv.core.peer.PeerEndpoint;
import io.orbitkv.core.peer.PeerMedium;
import io.orbitkv.core.peer.PeerPages;
import io.orbitkv.core.peer.PeerReader;
import io.orbitkv.core.peer.PeerSource;
import io.orbitkv.core.peer.ReleaseRetrier;
import io.orbitkv.core.peer.TicketTable;
import io.orbitkv.core.query.RemotePages;
import io.orbitkv.core.query.SessionScope;
import io.orbitkv.core.storage.StageResult;
import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.PageState;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * Query integration of peer reads, two Managers in one JVM: pages only Manager A holds are
 * planned on B as candidates (PENDING, RESERVED), fetched into B's DRAM over the peer workflow,
 * and served RESIDENT with A's exact bytes; with an invalid member view B starts no remote work;
 * a corrupted transfer is a miss on B, never a wrong hit. Both sides end holding nothing.
 */
class ManagerPeerQueryTest {

    static final Namespace NS = ManagerFixture.namespace("model-peer");
    static final NamespaceDigest DIGEST = NamespaceDigest.ofBytes(NS.digest());
    static final NodeIncarnation A = TwoMembers.A;
    static final NodeIncarnation B = TwoMembers.B;

    @TempDir
    Path dir;

    volatile boolean membershipValid = true;
    final MemberView members = new TwoMembers(() -> membershipValid);

    /** B's peer routes, bound once B's DRAM tier exists. */
    volatile RemotePages bRemote = RemotePages.NONE;
    final InMemoryTransport transport = new InMemoryTransport();
    ManagerFixture a;
    ManagerFixture b;
    TicketTable aTickets;

    @BeforeEach
    void open() throws Exception {
        a = ManagerFixture.open(dir.resolve("a"));
        RemotePages forward = new RemotePages() {
            @Override
            public long stagingBytes(StateKey key, SessionScope scope) {
                return bRemote.stagingBytes(key, scope);
            }

            @Override
            public CompletableFuture<StageResult> fetch(StateKey key, SessionScope scope) {
                return bRemote.fetch(key, scope);
            }
        };
        b = new ManagerFixture(dir.resolve("b"), 64, a.limits, a.config, forward);
        aTickets = new TicketTable(64, TimeUnit.SECONDS.toNanos(30));
        transport.add("mem:a", new PeerSource(A, a.store, a.namespaces, members, aTickets, System::nanoTime));
        ReleaseRetrier releases = new ReleaseRetrier(transport, 64, 4, TimeUnit.MILLISECONDS.toNanos(10),
                TimeUnit.MILLISECONDS.toNanos(100));
        PeerReader reader = new PeerReader(B, b.store.dram(), members, transport, releases, System::nanoTime);
        bRemote = new PeerPages(this::catalogEvidence, reader, members, ManagerFixture.SLOT);
    }

    /** Stands in for the catalog: A's DRAM image of the key as evidence, read off A's store. */
    List<PeerCandidate> catalogEvidence(StateKey key, NamespaceDigest namespace) {
        if (!namespace.equals(DIGEST) || !(a.store.dram().acquire(key, a.namespaces.id(namespace).orElse(-1)) instanceof Lease lease)) return List.of();
        try {
            return List.of(new PeerCandidate(new PeerEndpoint(A, "mem:a"), key, namespace, PeerMedium.DRAM,
                    lease.imageId(), a.store.residency().lastSequence()));
        } finally {
            lease.release();
        }
    }

    @AfterEach
    void close() {
        b.close();
        a.close();
    }

    void publishOnA(long prompt, long... pages) {
        try (Client ca = a.register("ea", 1, NS, ManagerFixture.FULL)) {
            ca.publish(prompt, 0, pages);
            for (long p : pages) {
                StateKey key = Client.key(NS, prompt, 0, p);
                await().atMost(RecordingSink.WAIT).until(() -> a.store.dram().contains(key) && a.store.ssd().contains(key));
            }
        }
        a.assertNothingHeld();
    }

    void assertSourceIdle() {
        await().atMost(RecordingSink.WAIT).until(() -> aTickets.size() == 0 && aTickets.activeTransfers() == 0);
        a.assertNothingHeld();
    }

    @Test
    void pagesOnlyAPeerHoldsArePendingThenResidentWithTheSourcesBytes() {
        publishOnA(4, 0, 1, 2);
        try (Client c = b.register("eb", 1, NS, ManagerFixture.FULL)) {
            Reply.QueryResult pending = c.queryFull(1, 4, 3);
            assertThat(pending.status()).isEqualTo(QueryStatus.PENDING);
            assertThat(pending.boundaryTokens()).isEqualTo(48);
            assertThat(ManagerCoreTest.states(pending, 0)).containsOnly(PageState.RESERVED);
            assertThat(c.sink.await(1, CompletionEvent.QUERY_SETTLED).outcome()).isEqualTo(Reply.Settled.OK);
            Reply.QueryResult fin = (Reply.QueryResult) c.send(new Request.QueryPoll(1, 0));
            assertThat(fin.status()).isEqualTo(QueryStatus.FINAL);
            assertThat(ManagerCoreTest.states(fin, 0)).containsOnly(PageState.RESIDENT);
            c.assertBytes(fin, 4);
            c.send(new Request.Release(1));
        }
        b.assertNothingHeld();
        assertSourceIdle();
        assertThat(b.store.dram().contains(Client.key(NS, 4, 0, 2))).as("now a local DRAM page of B").isTrue();
    }

    @Test
    void invalidMembershipMeansNoRemoteWorkAndAMiss() {
        publishOnA(5, 0, 1);
        membershipValid = false;
        try (Client c = b.register("eb", 1, NS, ManagerFixture.FULL)) {
            Reply.QueryResult r = c.queryFull(1, 5, 2);
            assertThat(r.boundaryTokens()).isZero();
            assertThat(r.status()).isNotEqualTo(QueryStatus.PENDING);
        }
        assertThat(transport.releaseCalls.get()).isZero();
        assertThat(aTickets.freedTotal()).isZero();
        b.assertNothingHeld();
    }

    @Test
    void corruptedPeerPayloadIsAMissNeverAWrongHit() {
        publishOnA(6, 0);
        transport.corruptChunk = 0;
        try (Client c = b.register("eb", 1, NS, ManagerFixture.FULL)) {
            Reply.QueryResult pending = c.queryFull(1, 6, 1);
            assertThat(pending.status()).isEqualTo(QueryStatus.PENDING);
            c.sink.await(1, CompletionEvent.QUERY_SETTLED);
            Reply.QueryResult fin = (Reply.QueryResult) c.send(new Request.QueryPoll(1, 0));
            assertThat(fin.boundaryTokens()).isZero();
            c.assertBytes(fin, 6);
            c.send(new Request.Release(1));
        }
        assertThat(b.store.dram().contains(Client.key(NS, 6, 0, 0))).isFalse();
        b.assertNothingHeld();
        assertSourceIdle();
    }
}
