package io.orbitkv.core.engine;

import io.orbitkv.core.cost.ByteCount;
import io.orbitkv.core.cost.CostConfig;
import io.orbitkv.core.cost.CostKey;
import io.orbitkv.core.cost.CostObserver;
import io.orbitkv.core.cost.Lookup;
import io.orbitkv.core.cost.Observation;
import io.orbitkv.core.cost.SelectionConfig;
import io.orbitkv.core.cost.Terminal;
import io.orbitkv.core.cost.Timeline;
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
import io.orbitkv.core.query.SourceSelector;
import io.orbitkv.core.storage.StageResult;
import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.core.storage.ssd.ExtentLayout;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.PageState;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * Guarded source selection in the query path, two Managers in one JVM: B holds a page on its
 * local SSD (not in DRAM), A holds it in DRAM. Warm injected estimates say the peer DRAM route
 * is 10,000x faster than B's SSD route. Local SSD vs peer DRAM is cross-medium, so: with only
 * same-medium selection B's SSD serves; with cross-medium selection the peer serves; a peer
 * refusal before payload hands over to local SSD; a corrupted transfer after payload makes the
 * page a miss with no local SSD read. Bytes always equal the published image.
 */
class ManagerSourceSelectionTest {

    static final Namespace NS = ManagerFixture.namespace("model-select");
    static final NamespaceDigest DIGEST = NamespaceDigest.ofBytes(NS.digest());
    static final NodeIncarnation A = TwoMembers.A;
    static final NodeIncarnation B = TwoMembers.B;
    static final long PROMPT = 7;
    static final long PADDED = ExtentLayout.paddedPayloadBytes(ManagerFixture.PAGE_BYTES);

    @TempDir
    Path dir;

    final MemberView members = TwoMembers.alwaysValid();

    final InMemoryTransport transport = new InMemoryTransport();
    final AtomicInteger fetches = new AtomicInteger();
    volatile RemotePages bRemote = RemotePages.NONE;
    /** Added to the catalog's generation: non-zero makes A refuse the authorization (GENERATION_GONE). */
    volatile long staleGeneration;
    ManagerFixture a;
    ManagerFixture b;
    TicketTable aTickets;

    /** Opens A and B (B observing costs under {@code selection}), publishes the page on both, evicts it from B's DRAM. */
    void open(SelectionConfig selection) throws IOException {
        a = ManagerFixture.open(dir.resolve("a"));
        RemotePages forward = new RemotePages() {
            @Override
            public long stagingBytes(StateKey key, SessionScope scope) {
                return bRemote.stagingBytes(key, scope);
            }

            @Override
            public Optional<io.orbitkv.core.cost.SourceOffer> offer(StateKey key, SessionScope scope,
                                                                     io.orbitkv.core.cost.Shape shape) {
                return bRemote.offer(key, scope, shape);
            }

            @Override
            public CompletableFuture<StageResult> fetch(StateKey key, SessionScope scope) {
                fetches.incrementAndGet();
                return bRemote.fetch(key, scope);
            }
        };
        CostObserver cost = CostObserver.create(CostConfig.defaults(true), selection, new SimpleMeterRegistry(),
                System::nanoTime);
        b = new ManagerFixture(dir.resolve("b"), 64, a.limits, a.config, forward, cost);
        aTickets = new TicketTable(64, TimeUnit.SECONDS.toNanos(30));
        transport.add("mem:a", new PeerSource(A, a.store, a.namespaces, members, aTickets, System::nanoTime));
        ReleaseRetrier releases = new ReleaseRetrier(transport, 64, 4, TimeUnit.MILLISECONDS.toNanos(10),
                TimeUnit.MILLISECONDS.toNanos(100));
        PeerReader reader = new PeerReader(B, b.store.dram(), members, transport, releases, System::nanoTime);
        bRemote = new PeerPages(this::catalogEvidence, reader, members, ManagerFixture.SLOT, cost, System::nanoTime);
        publish(a, false);
        publish(b, true);
    }

    void publish(ManagerFixture m, boolean evictFromDram) {
        StateKey key = key();
        try (Client c = m.register("e", 1, NS, ManagerFixture.FULL)) {
            c.publish(PROMPT, 0, 0);
            await().atMost(RecordingSink.WAIT).until(() -> m.store.dram().contains(key) && m.store.ssd().contains(key));
            if (evictFromDram) {
                await().atMost(RecordingSink.WAIT).until(() -> m.store.dram().evict(key) || !m.store.dram().contains(key));
            }
        }
        m.assertNothingHeld();
    }

    static StateKey key() {
        return Client.key(NS, PROMPT, 0, 0);
    }

    /** Stands in for the catalog: A's DRAM image of the key (generation shifted by {@link #staleGeneration}). */
    List<PeerCandidate> catalogEvidence(StateKey key, NamespaceDigest namespace) {
        if (!namespace.equals(DIGEST) || !(a.store.dram().acquire(key, a.namespaces.id(namespace).orElse(-1)) instanceof Lease lease)) return List.of();
        try {
            return List.of(new PeerCandidate(new PeerEndpoint(A, "mem:a"), key, namespace, PeerMedium.DRAM,
                    lease.imageId() + staleGeneration, a.store.residency().lastSequence()));
        } finally {
            lease.release();
        }
    }

    CostKey localKey() {
        return b.store.ssd().readRouteKey(PADDED);
    }

    CostKey peerKey() {
        PeerCandidate fromA = catalogEvidence(key(), DIGEST).getFirst();
        return PeerPages.fetchKey(fromA, SourceSelector.pageShape(PADDED));
    }

    /** Warm evidence: B's SSD route 10 ms, the peer DRAM route 1 µs. */
    void injectPeerFaster() {
        inject(localKey(), 10_000_000);
        inject(peerKey(), 1_000);
    }

    void inject(CostKey key, long nanos) {
        for (int i = 0; i < b.cost.config().warmSamples() + 2; i++) {
            b.cost.record(new Observation(key, Terminal.SUCCEEDED, new Timeline(0, 0, 0, nanos),
                    ByteCount.known(ManagerFixture.PAGE_BYTES), ByteCount.known(ManagerFixture.PAGE_BYTES)));
        }
    }

    long samples(CostKey key) {
        return switch (b.cost.estimate(key)) {
            case Lookup.Warm w -> w.estimate().samples();
            case Lookup.Cold c -> c.samples();
            case Lookup.Missing m -> 0;
        };
    }

    /** Queries the page on B and returns the FINAL result after checking its bytes. */
    Reply.QueryResult query() {
        try (Client c = b.register("eb", 1, NS, ManagerFixture.FULL)) {
            Reply.QueryResult first = c.queryFull(1, PROMPT, 1);
            assertThat(first.status()).isEqualTo(QueryStatus.PENDING);
            assertThat(c.sink.await(1, CompletionEvent.QUERY_SETTLED).outcome()).isEqualTo(Reply.Settled.OK);
            Reply.QueryResult fin = (Reply.QueryResult) c.send(new Request.QueryPoll(1, 0));
            assertThat(fin.status()).isEqualTo(QueryStatus.FINAL);
            c.assertBytes(fin, PROMPT);
            c.send(new Request.Release(1));
            return fin;
        }
    }

    @AfterEach
    void close() {
        if (b != null) {
            b.assertNothingHeld();
            b.close();
        }
        if (a != null) {
            await().atMost(RecordingSink.WAIT).until(() -> aTickets.size() == 0 && aTickets.activeTransfers() == 0);
            a.assertNothingHeld();
            a.close();
        }
    }

    @Test
    void crossMediumOffLocalSsdServesAlthoughThePeerIsMeasuredFaster() throws IOException {
        open(SelectionConfig.sameMedium());
        injectPeerFaster();
        Reply.QueryResult fin = query();
        assertThat(ManagerCoreTest.states(fin, 0)).containsOnly(PageState.RESIDENT);
        assertThat(fetches.get()).as("no peer fetch").isZero();
        assertThat(b.cost.selectionSwitched()).isZero();
    }

    @Test
    void crossMediumOnWithFreshEvidenceForAllThePeerDramServes() throws IOException {
        open(SelectionConfig.crossMedium());
        injectPeerFaster();
        long peerSamples = samples(peerKey());
        Reply.QueryResult fin = query();
        assertThat(ManagerCoreTest.states(fin, 0)).containsOnly(PageState.RESIDENT);
        assertThat(fetches.get()).isEqualTo(1);
        assertThat(b.cost.selectionSwitched()).isEqualTo(1);
        assertThat(samples(peerKey())).as("the real fetch trained the peer route").isEqualTo(peerSamples + 1);
    }

    @Test
    void crossMediumOnWithoutEvidenceForLocalSsdKeepsLocalSsd() throws IOException {
        open(SelectionConfig.crossMedium());
        inject(peerKey(), 1_000);
        Reply.QueryResult fin = query();
        assertThat(ManagerCoreTest.states(fin, 0)).containsOnly(PageState.RESIDENT);
        assertThat(fetches.get()).isZero();
        assertThat(b.cost.selectionSwitched()).isZero();
    }

    @Test
    void aChosenPeerRefusedBeforePayloadHandsOverToLocalSsd() throws IOException {
        open(SelectionConfig.crossMedium());
        injectPeerFaster();
        staleGeneration = 1_000;
        Reply.QueryResult fin = query();
        assertThat(fin.boundaryTokens()).isEqualTo(ManagerFixture.PAGE_TOKENS);
        assertThat(ManagerCoreTest.states(fin, 0)).containsOnly(PageState.RESIDENT);
        assertThat(fetches.get()).as("the peer was tried first").isEqualTo(1);
        assertThat(b.cost.selectionSwitched()).isEqualTo(1);
        assertThat(transport.releaseCalls.get()).as("no ticket was granted").isZero();
    }

    @Test
    void aFailureAfterPayloadIsAMissAndNoOtherMediumIsTried() throws IOException {
        open(SelectionConfig.crossMedium());
        injectPeerFaster();
        transport.corruptChunk = 0;
        Reply.QueryResult fin = query();
        assertThat(fin.boundaryTokens()).as("the page became a miss").isZero();
        assertThat(fetches.get()).isEqualTo(1);
        assertThat(b.store.dram().contains(key())).as("local SSD was not read into DRAM").isFalse();
        assertThat(samples(localKey())).as("no local SSD read was recorded")
                .isEqualTo(b.cost.config().warmSamples() + 2);
    }
}
