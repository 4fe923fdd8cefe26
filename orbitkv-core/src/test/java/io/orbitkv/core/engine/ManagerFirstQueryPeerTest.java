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
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.PageState;
import io.orbitkv.state.protocol.ProtocolLimits;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * First-query peer hits, two Managers in one JVM: a QUERY whose prefix only Manager A holds,
 * sent to B with a peer wait bound, is answered PENDING, B asks its catalog about the whole
 * missing prefix at once, fetches every page in one batch and settles a full hit with A's bytes
 * (without a bound it misses, as engines that never wait expect); past the bound B settles with
 * what is local and releases late fetches when they land; CANCEL while B is still asking drains
 * at once; a staging budget smaller than the prefix gives the longest boundary that fits.
 *
 * <p>The catalog here knows a key only after {@link RemotePages#discover} asked for it, as the
 * real one does (its cache is filled by lookups), so a QUERY that does not discover cannot find
 * the peer.
 */
class ManagerFirstQueryPeerTest {

    static final Namespace NS = ManagerFixture.namespace("model-first-query");
    static final NamespaceDigest DIGEST = NamespaceDigest.ofBytes(NS.digest());
    static final NodeIncarnation A = TwoMembers.A;
    static final NodeIncarnation B = TwoMembers.B;

    @TempDir
    Path dir;

    final MemberView members = TwoMembers.alwaysValid();

    final InMemoryTransport transport = new InMemoryTransport();
    /** Keys B's catalog has answered (its candidate cache). */
    final Set<StateKey> discovered = ConcurrentHashMap.newKeySet();
    /** Every discover call's keys, and every fetchAll batch, in order. */
    final List<List<StateKey>> discoverCalls = new CopyOnWriteArrayList<>();
    final List<List<StateKey>> batches = new CopyOnWriteArrayList<>();
    /** When set, discover answers only once this completes. */
    final AtomicReference<CompletableFuture<Void>> catalogGate = new AtomicReference<>(CompletableFuture.completedFuture(null));
    /** When set, every peer fetch result is delivered only once this completes. */
    final AtomicReference<CompletableFuture<Void>> fetchGate = new AtomicReference<>(CompletableFuture.completedFuture(null));

    volatile RemotePages bRemote = RemotePages.NONE;
    ManagerFixture a;
    ManagerFixture b;
    TicketTable aTickets;

    @BeforeEach
    void open() throws Exception {
        openB(ManagerBounds.DEFAULTS);
    }

    void openB(ManagerBounds config) throws Exception {
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

            @Override
            public List<CompletableFuture<StageResult>> fetchAll(List<StateKey> keys, SessionScope scope) {
                batches.add(List.copyOf(keys));
                CompletableFuture<Void> gate = fetchGate.get();
                List<CompletableFuture<StageResult>> out = new ArrayList<>();
                for (CompletableFuture<StageResult> f : bRemote.fetchAll(keys, scope)) out.add(f.thenCombine(gate, (r, x) -> r));
                return out;
            }

            @Override
            public boolean discoverable() {
                return bRemote.discoverable();
            }

            @Override
            public CompletableFuture<Void> discover(List<StateKey> keys, SessionScope scope) {
                discoverCalls.add(List.copyOf(keys));
                return catalogGate.get().thenRun(() -> discovered.addAll(keys));
            }
        };
        b = new ManagerFixture(dir.resolve("b"), 64, ProtocolLimits.DEFAULTS, config, forward);
        aTickets = new TicketTable(64, TimeUnit.SECONDS.toNanos(30));
        transport.add("mem:a", new PeerSource(A, a.store, a.namespaces, members, aTickets, System::nanoTime));
        ReleaseRetrier releases = new ReleaseRetrier(transport, 64, 4, TimeUnit.MILLISECONDS.toNanos(10),
                TimeUnit.MILLISECONDS.toNanos(100));
        PeerReader reader = new PeerReader(B, b.store.dram(), members, transport, releases, System::nanoTime);
        bRemote = new PeerPages(this::catalogEvidence, reader, members, ManagerFixture.SLOT);
    }

    /** B's catalog: A's DRAM image of a key B has looked up. */
    List<PeerCandidate> catalogEvidence(StateKey key, NamespaceDigest namespace) {
        if (!discovered.contains(key) || !namespace.equals(DIGEST) || !(a.store.dram().acquire(key, a.namespaces.id(namespace).orElse(-1)) instanceof Lease lease)) {
            return List.of();
        }
        try {
            return List.of(new PeerCandidate(new PeerEndpoint(A, "mem:a"), key, namespace, PeerMedium.DRAM,
                    lease.imageId(), a.store.residency().lastSequence()));
        } finally {
            lease.release();
        }
    }

    @AfterEach
    void close() {
        if (b != null) b.close();
        if (a != null) a.close();
    }

    void publishOnA(long prompt, int pages) {
        long[] all = new long[pages];
        for (int p = 0; p < pages; p++) all[p] = p;
        try (Client ca = a.register("ea", 1, NS, ManagerFixture.FULL)) {
            ca.publish(prompt, 0, all);
            for (long p : all) {
                StateKey key = Client.key(NS, prompt, 0, p);
                await().atMost(RecordingSink.WAIT).until(() -> a.store.dram().contains(key));
            }
        }
    }

    static Request.Query query(long op, long prompt, int pages, int peerWaitMillis) {
        return Client.query(op, 0, CompletionTarget.HOST_READY, (long) pages * ManagerFixture.PAGE_TOKENS + 1, 0,
                prompt, new int[] {0}, pages).withPeerWaitMillis(peerWaitMillis);
    }

    static Reply.QueryResult settled(Client c, Reply.QueryResult first) {
        if (first.status() == QueryStatus.FINAL) return first;
        c.sink.await(first.operationId(), CompletionEvent.QUERY_SETTLED);
        return (Reply.QueryResult) c.send(new Request.QueryPoll(first.operationId(), first.revision()));
    }

    double peerWaits(String outcome) {
        return b.registry.counter("orbitkv.manager.peer.waits", "outcome", outcome).count();
    }

    void assertSourceIdle() {
        await().atMost(RecordingSink.WAIT).until(() -> aTickets.size() == 0 && aTickets.activeTransfers() == 0);
    }

    @Test
    void aPrefixOnlyAPeerHoldsIsAFullHitOnTheFirstQueryThatMayWait() {
        publishOnA(11, 8);
        try (Client c = b.register("eb", 1, NS, ManagerFixture.FULL)) {
            Reply.QueryResult noWait = (Reply.QueryResult) c.send(query(1, 11, 8, 0));
            assertThat(noWait.status()).as("a QUERY that may not wait never waits").isEqualTo(QueryStatus.FINAL);
            assertThat(noWait.boundaryTokens()).isZero();
            assertThat(discoverCalls).as("the whole missing prefix is looked up in the background").hasSize(1);
            assertThat(discoverCalls.getFirst()).hasSize(8);
            c.send(new Request.Release(1));
            Reply.QueryResult next = (Reply.QueryResult) c.send(query(3, 11, 8, 0));
            assertThat(settled(c, next).boundaryTokens()).as("the next QUERY without a wait finds all 8 pages")
                    .isEqualTo(8L * ManagerFixture.PAGE_TOKENS);
            c.send(new Request.Release(3));
            discovered.clear(); // the catalog's cache expired
            discoverCalls.clear();
            batches.clear();
            for (int p = 0; p < 8; p++) b.store.dram().evict(Client.key(NS, 11, 0, p)); // B forgets what it fetched

            Reply.QueryResult pending = (Reply.QueryResult) c.send(query(2, 11, 8, 5_000));
            assertThat(pending.status()).isEqualTo(QueryStatus.PENDING);
            assertThat(c.sink.await(2, CompletionEvent.QUERY_SETTLED).outcome()).isEqualTo(Reply.Settled.OK);
            Reply.QueryResult fin = (Reply.QueryResult) c.send(new Request.QueryPoll(2, 0));
            assertThat(fin.status()).isEqualTo(QueryStatus.FINAL);
            assertThat(fin.boundaryTokens()).as("the whole prefix on the first query").isEqualTo(8L * ManagerFixture.PAGE_TOKENS);
            assertThat(ManagerCoreTest.states(fin, 0)).hasSize(8).containsOnly(PageState.RESIDENT);
            c.assertBytes(fin, 11);
            assertThat(discoverCalls).as("one catalog batch naming every missing page").hasSize(1);
            assertThat(discoverCalls.getFirst()).hasSize(8);
            assertThat(batches).as("one fetch batch for the whole prefix").hasSize(1);
            assertThat(batches.getFirst()).hasSize(8);
            assertThat(peerWaits("settled")).as("only the QUERY that may wait counts a wait").isEqualTo(1);
            for (String phase : new String[] {"discovery", "fetch"}) {
                assertThat(b.registry.timer("orbitkv.manager.peer.wait.phase", "phase", phase).count())
                        .as("the settled wait's %s phase, timed once", phase).isEqualTo(1);
            }
            c.send(new Request.Release(2));
        }
        b.assertNothingHeld();
        assertSourceIdle();
    }

    @Test
    void pastTheWaitBoundALookupThatNeverAnswersSettlesWithWhatIsLocal() {
        publishOnA(12, 4);
        catalogGate.set(new CompletableFuture<>()); // the catalog never answers
        try (Client c = b.register("eb", 1, NS, ManagerFixture.FULL)) {
            Reply.QueryResult pending = (Reply.QueryResult) c.send(query(1, 12, 4, 100));
            assertThat(pending.status()).isEqualTo(QueryStatus.PENDING);
            assertThat(c.sink.await(1, CompletionEvent.QUERY_SETTLED).outcome()).isEqualTo(Reply.Settled.OK);
            Reply.QueryResult fin = (Reply.QueryResult) c.send(new Request.QueryPoll(1, 0));
            assertThat(fin.status()).isEqualTo(QueryStatus.FINAL);
            assertThat(fin.boundaryTokens()).isZero();
            assertThat(batches).isEmpty();
            assertThat(peerWaits("expired")).isEqualTo(1);
            assertThat(peerWaits("settled")).isZero();
            c.send(new Request.Release(1));
        }
        b.assertNothingHeld();
    }

    @Test
    void pastTheWaitBoundFetchesInFlightAreGivenUpReleasedWhenTheyLandAndLocalPagesServe() {
        publishOnA(13, 4);
        CompletableFuture<Void> slow = new CompletableFuture<>();
        fetchGate.set(slow);
        try (Client c = b.register("eb", 1, NS, ManagerFixture.FULL)) {
            Reply.QueryResult pending = (Reply.QueryResult) c.send(query(1, 13, 4, 200));
            assertThat(pending.status()).isEqualTo(QueryStatus.PENDING);
            assertThat(c.sink.await(1, CompletionEvent.QUERY_SETTLED).outcome()).isEqualTo(Reply.Settled.OK);
            Reply.QueryResult fin = (Reply.QueryResult) c.send(new Request.QueryPoll(1, 0));
            assertThat(fin.status()).isEqualTo(QueryStatus.FINAL);
            // the bytes reached B's DRAM but their fetch results did not: the local plan serves them
            assertThat(fin.boundaryTokens()).as("pages already in local DRAM count as local")
                    .isEqualTo(4L * ManagerFixture.PAGE_TOKENS);
            c.assertBytes(fin, 13);
            assertThat(batches).hasSize(1);
            Reply released = c.send(new Request.Release(1));
            assertThat(released).isInstanceOf(Reply.Released.class);
            assertThat(((Reply.Released) released).drained()).as("the given-up fetches are still in flight").isFalse();
            slow.complete(null); // the fetches land after the answer: their leases are released
            c.sink.await(1, CompletionEvent.DRAINED);
        }
        b.assertNothingHeld();
        assertSourceIdle();
    }

    @Test
    void cancelWhileTheCatalogIsAskedEndsAtOnceAndALateAnswerChangesNothing() {
        publishOnA(14, 3);
        CompletableFuture<Void> late = new CompletableFuture<>();
        catalogGate.set(late);
        try (Client c = b.register("eb", 1, NS, ManagerFixture.FULL)) {
            Reply.QueryResult pending = (Reply.QueryResult) c.send(query(1, 14, 3, 5_000));
            assertThat(pending.status()).isEqualTo(QueryStatus.PENDING);
            Reply cancelled = c.send(new Request.Cancel(1));
            assertThat(cancelled).isInstanceOf(Reply.Cancelled.class);
            assertThat(((Reply.Cancelled) cancelled).drained()).as("nothing was in flight but a lookup").isTrue();
            late.complete(null);
            await().atMost(RecordingSink.WAIT).until(() -> discovered.size() == 3);
            assertThat(batches).as("a late catalog answer starts no fetch").isEmpty();
            assertThat(peerWaits("stopped")).isEqualTo(1);
        }
        b.assertNothingHeld();
    }

    @Test
    void aStagingBudgetSmallerThanThePrefixGivesTheLongestBoundaryThatFits() throws Exception {
        close();
        // room for 3 pages of 32 KiB (the largest slot each peer page is charged) of an 8-page prefix
        openB(ManagerBounds.DEFAULTS.withStagingBudgetBytes(3L * ManagerFixture.SLOT + 100));
        publishOnA(15, 8);
        try (Client c = b.register("eb", 1, NS, ManagerFixture.FULL)) {
            c.send(query(1, 15, 8, 5_000));
            c.sink.await(1, CompletionEvent.QUERY_SETTLED);
            Reply.QueryResult fin = (Reply.QueryResult) c.send(new Request.QueryPoll(1, 0));
            assertThat(fin.status()).isEqualTo(QueryStatus.FINAL);
            assertThat(fin.hit()).isTrue();
            assertThat(fin.boundaryTokens()).as("a shorter boundary, not NO_SPACE").isEqualTo(3L * ManagerFixture.PAGE_TOKENS);
            c.assertBytes(fin, 15);
            c.send(new Request.Release(1));
        }
        b.assertNothingHeld();
        assertSourceIdle();
    }
}
