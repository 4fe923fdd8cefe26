package io.orbitkv.core.peer;

import io.orbitkv.core.catalog.Member;
import io.orbitkv.core.catalog.MembershipView;
import io.orbitkv.core.log.UnexpectedErrors;
import io.orbitkv.core.log.UnexpectedErrors.Layer;
import io.orbitkv.core.query.SessionScope;
import io.orbitkv.core.storage.StageResult;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.StateKey;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@link PeerPages#fetchAll}: pages are grouped by their first candidate's source into one
 * {@link PayloadTransport#fetchBatch} per source; a page its first source refuses falls back to
 * its next candidate; a page with no candidate is a NOT_FOUND miss; a corrupted page is a CORRUPT
 * miss (after payload); nothing leaks. Also {@link PeerRoutes}' member-left hook.
 *
 * <p>And the peer layer's error boundary on this real path ({@link PeerPages} over
 * {@link PeerReader} over a transport): a transport that throws, or whose future fails, where its
 * contract says it answers values, is a bug. The read still answers a miss (never a wrong hit,
 * never an exception), nothing is left behind (the requester's reserved bytes and leases, the
 * source's tickets and pins), and {@code orbitkv_unexpected_errors_total{layer="peer"}} counts it.
 */
class PeerPagesBatchTest {

    static final NodeIncarnation A = new NodeIncarnation("a", 1);
    static final NodeIncarnation B = new NodeIncarnation("b", 1);
    static final NodeIncarnation C = new NodeIncarnation("c", 1);
    static final Namespace NS = new Namespace("peer-batch", "r1", "sha256:w", "sha256:t", "", "bf16", "nhd", 16, 1, 0, 1, 0, 1);
    static final SessionScope SCOPE = new SessionScope(NS, PeerNode.NS, new RecoveryContract(16, List.of(new StateGroup.Full(0))));

    /** Counts batches per source, then runs the in-memory transport's (one fetch per page). */
    static final class CountingTransport implements PayloadTransport {
        final InMemoryTransport inner = new InMemoryTransport();
        final List<String> batches = new CopyOnWriteArrayList<>();
        final List<NodeIncarnation> left = new CopyOnWriteArrayList<>();

        @Override
        public List<CompletableFuture<FetchOutcome>> fetchBatch(PeerEndpoint source, List<AuthorizeRequest> requests,
                                                                List<? extends FetchSink> receivers) {
            batches.add(source.node().nodeId() + ":" + requests.size());
            return inner.fetchBatch(source, requests, receivers);
        }

        @Override
        public CompletableFuture<FetchOutcome> fetch(PeerEndpoint source, AuthorizeRequest request, FetchSink receiver) {
            return inner.fetch(source, request, receiver);
        }

        @Override
        public void onMemberLeft(NodeIncarnation member) {
            left.add(member);
        }

        @Override
        public CompletableFuture<AuthorizeResult> authorize(PeerEndpoint source, AuthorizeRequest request) {
            return inner.authorize(source, request);
        }

        @Override
        public CompletableFuture<TransferEnd> transfer(PeerEndpoint source, AuthorizeResult.Granted ticket,
                                                       NodeIncarnation requester, PayloadSink sink) {
            return inner.transfer(source, ticket, requester, sink);
        }

        @Override
        public CompletableFuture<ReleaseAck> release(PeerEndpoint source, long ticketId, NodeIncarnation requester) {
            return inner.release(source, ticketId, requester);
        }
    }

    @TempDir
    Path dir;

    final PeerNode.Members members = new PeerNode.Members();
    final CountingTransport transport = new CountingTransport();
    final Map<StateKey, List<PeerCandidate>> known = new HashMap<>();
    PeerNode a;
    PeerNode b;
    PeerNode c;
    ReleaseRetrier releases;
    PeerPages pages;

    // 32 slots: with 8, the tier's pressure handling may drop a third freshly committed page
    @BeforeEach
    void open() throws Exception {
        members.live.put("a", A);
        members.live.put("b", B);
        members.live.put("c", C);
        a = new PeerNode(dir, A, members, 32);
        b = new PeerNode(dir, B, members, 32);
        c = new PeerNode(dir, C, members, 32);
        transport.inner.add(a);
        transport.inner.add(c);
        releases = new ReleaseRetrier(transport, 16, 4, 100, 800);
        PeerReader reader = new PeerReader(B, b.store.dram(), members, transport, releases, b.clock::get);
        pages = new PeerPages((k, ns) -> known.getOrDefault(k, List.of()), reader, members, PeerNode.SLOT);
    }

    @AfterEach
    void close() {
        a.close();
        b.close();
        c.close();
    }

    void assertNothingLeaked() {
        releases.onTick(Long.MAX_VALUE / 2);
        assertThat(a.tickets.size()).isZero();
        assertThat(c.tickets.size()).isZero();
        assertThat(a.store.dram().usage().leases()).isZero();
        assertThat(c.store.dram().usage().leases()).isZero();
        assertThat(b.store.dram().usage().reservedBytes()).isZero();
        assertThat(b.store.dram().usage().leases()).isZero();
    }

    @Test
    void onePageBatchPerSourceAndARefusedPageFallsBackToItsNextCandidate() {
        List<StateKey> keys = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            StateKey k = PeerNode.key(100 + i);
            known.put(k, List.of(a.dramCandidate(k, a.putInDram(k))));
            keys.add(k);
        }
        StateKey onC = PeerNode.key(200);
        known.put(onC, List.of(c.dramCandidate(onC, c.putInDram(onC))));
        keys.add(onC);
        // first candidate a (owner id order) does not hold it any more; c does
        StateKey moved = PeerNode.key(300);
        long cGen = c.putInDram(moved);
        known.put(moved, List.of(a.dramCandidate(moved, AuthorizeRequest.CURRENT_GENERATION), c.dramCandidate(moved, cGen)));
        keys.add(moved);
        StateKey nowhere = PeerNode.key(400);
        keys.add(nowhere);

        List<StageResult> results = pages.fetchAll(keys, SCOPE).stream().map(CompletableFuture::join).toList();

        assertThat(transport.batches).containsExactlyInAnyOrder("a:4", "c:1");
        for (int i = 0; i < 5; i++) {
            StageResult.Staged s = (StageResult.Staged) results.get(i);
            assertThat(s.lease().key()).isEqualTo(keys.get(i));
            assertThat(PeerNode.read(s.lease().segment())).isEqualTo(PeerNode.bytesOf(keys.get(i)));
            s.lease().release();
        }
        assertThat(results.get(5)).isEqualTo(new StageResult.Miss(nowhere, StageResult.MissReason.NOT_FOUND));
        assertNothingLeaked();
    }

    @Test
    void aCorruptedPageOfABatchIsACorruptMissAndTheOthersArrive() {
        List<StateKey> keys = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            StateKey k = PeerNode.key(500 + i);
            known.put(k, List.of(a.dramCandidate(k, a.putInDram(k))));
            keys.add(k);
        }
        transport.inner.corruptChunk = 1;
        List<StageResult> results = pages.fetchAll(keys, SCOPE).stream().map(CompletableFuture::join).toList();
        for (int i = 0; i < 3; i++) {
            assertThat(results.get(i)).isEqualTo(new StageResult.Miss(keys.get(i), StageResult.MissReason.CORRUPT));
        }
        assertNothingLeaked();
    }

    @Test
    void invalidMembershipMakesEveryPageANotFoundMissWithoutABatch() {
        StateKey k = PeerNode.key(600);
        known.put(k, List.of(a.dramCandidate(k, a.putInDram(k))));
        members.valid = false;
        assertThat(pages.fetchAll(List.of(k), SCOPE).getFirst().join())
                .isEqualTo(new StageResult.Miss(k, StageResult.MissReason.NOT_FOUND));
        assertThat(transport.batches).isEmpty();
    }

    @Test
    void routesCallTheMemberLeftHookForEachIncarnationThatLeftTheView() {
        AtomicReference<MembershipView> view = new AtomicReference<>(MembershipView.valid(List.of(
                new Member("a", "127.0.0.1:1", 1), new Member("b", "127.0.0.1:2", 1), new Member("c", "127.0.0.1:3", 1)), 1));
        MembershipMembers live = new MembershipMembers(view::get, B);
        PeerRoutes routes = new PeerRoutes(pages, b.source, releases, view::get, live, transport::onMemberLeft);
        routes.onTick(1);
        assertThat(transport.left).isEmpty();
        view.set(MembershipView.valid(List.of(new Member("a", "127.0.0.1:1", 2), new Member("b", "127.0.0.1:2", 1)), 2));
        routes.onTick(2);
        assertThat(transport.left).containsExactlyInAnyOrder(new NodeIncarnation("a", 1), new NodeIncarnation("c", 1));
    }

    /** Releases retried, then the source's ticket windows run out: what a lost release leaves is freed there. */
    void assertNothingLeakedOnceTheWindowsEnd() {
        a.clock.addAndGet(TimeUnit.SECONDS.toNanos(31));
        a.source.onTick();
        assertNothingLeaked();
        assertThat(releases.pending()).as("releases pending").isZero();
    }

    StageResult fetchWith(InMemoryTransport.Bug bug, StateKey k) {
        transport.inner.bug = bug;
        long before = UnexpectedErrors.count(Layer.PEER);
        StageResult r = pages.fetch(k, SCOPE).join();
        assertThat(UnexpectedErrors.count(Layer.PEER) - before).as("counted under layer peer").isGreaterThanOrEqualTo(1);
        return r;
    }

    StateKey onA(long i) {
        StateKey k = PeerNode.key(i);
        known.put(k, List.of(a.dramCandidate(k, a.putInDram(k))));
        return k;
    }

    @Test
    void aTransportThatThrowsBeforeAnyGrantIsANotFoundMissCounted() {
        StateKey k = onA(600);
        assertThat(fetchWith(InMemoryTransport.Bug.AUTHORIZE_THROWS, k)).isEqualTo(new StageResult.Miss(k, StageResult.MissReason.NOT_FOUND));
        assertThat(b.store.dram().contains(k)).isFalse();
        assertNothingLeakedOnceTheWindowsEnd();
    }

    /** A miss after the grant: IO_ERROR, as a broken stream (the query must not try another medium); the slot is freed. */
    void assertBrokenAfterTheGrant(InMemoryTransport.Bug bug, long i) {
        StateKey k = onA(i);
        assertThat(fetchWith(bug, k)).isEqualTo(new StageResult.Miss(k, StageResult.MissReason.IO_ERROR));
        assertThat(b.store.dram().contains(k)).as("bytes whose fetch failed never become resident").isFalse();
        assertNothingLeakedOnceTheWindowsEnd();
    }

    @Test
    void aTransferThatThrowsAfterTheGrantIsABrokenStreamAndFreesTheSlot() {
        assertBrokenAfterTheGrant(InMemoryTransport.Bug.TRANSFER_THROWS, 601);
    }

    @Test
    void aFetchThatFailsAfterThePayloadLandedCommitsNothingAndFreesTheSlot() {
        assertBrokenAfterTheGrant(InMemoryTransport.Bug.FETCH_FAILS_AFTER_STREAM, 602);
    }

    @Test
    void aBatchThatThrowsIsAMissForEveryPageCounted() {
        List<StateKey> keys = List.of(onA(603), onA(604), onA(605));
        transport.inner.bug = InMemoryTransport.Bug.BATCH_THROWS;
        long before = UnexpectedErrors.count(Layer.PEER);
        List<StageResult> results = pages.fetchAll(keys, SCOPE).stream().map(CompletableFuture::join).toList();
        assertThat(UnexpectedErrors.count(Layer.PEER) - before).isGreaterThanOrEqualTo(1);
        assertThat(results).allSatisfy(r -> assertThat(r).isInstanceOf(StageResult.Miss.class));
        assertNothingLeakedOnceTheWindowsEnd();
    }

    @Test
    void theSameReadHitsOnceTheTransportAnswersValuesAgainAndCountsNothing() {
        StateKey k = onA(606);
        transport.inner.bug = InMemoryTransport.Bug.AUTHORIZE_THROWS;
        assertThat(pages.fetch(k, SCOPE).join()).isInstanceOf(StageResult.Miss.class);
        transport.inner.bug = InMemoryTransport.Bug.NONE;
        long before = UnexpectedErrors.count(Layer.PEER);
        StageResult r = pages.fetch(k, SCOPE).join();
        assertThat(r).isInstanceOf(StageResult.Staged.class);
        ((StageResult.Staged) r).lease().release();
        assertThat(UnexpectedErrors.count(Layer.PEER)).as("a good read counts nothing").isEqualTo(before);
        assertNothingLeakedOnceTheWindowsEnd();
    }
}
