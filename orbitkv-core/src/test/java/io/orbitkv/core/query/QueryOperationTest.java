package io.orbitkv.core.query;

import io.orbitkv.core.storage.StageResult;
import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.StateKey;
import io.orbitkv.core.transfer.EngineRegion;
import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.PageState;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@link QueryOperation} on its own: a real store, but the Manager's threads, clock and meters
 * replaced by {@link QueryKit}'s, so each test drives completions and time itself and reads what
 * the operation emitted and counted. The same scenarios run through a whole Manager in
 * {@code io.orbitkv.core.engine.ManagerStagingTest} and {@code ManagerFirstQueryPeerTest}.
 */
class QueryOperationTest {

    static final Namespace NS = QueryKit.namespace("model-op");
    static final long WAIT_NANOS = TimeUnit.MILLISECONDS.toNanos(50);

    @TempDir
    Path dir;
    QueryKit kit;
    SessionScope scope;
    final QueryKit.Peers peers = new QueryKit.Peers();

    @BeforeEach
    void open() throws Exception {
        kit = new QueryKit(dir);
        scope = kit.scope(NS, 1, QueryKit.FULL);
    }

    @AfterEach
    void close() {
        kit.close();
    }

    QueryOperation operation(long op, long prompt, int pages, int peerWaitMillis, QueryServices.Bounds bounds) {
        return new QueryOperation(kit.services(peers, bounds), kit.session, QueryKit.queryFull(op, prompt, pages,
                peerWaitMillis), scope);
    }

    StateKey key(long prompt, long page) {
        return QueryKit.key(NS, prompt, 0, page);
    }

    /** Pages 0 and 1 of {@code prompt} published here, 2 and 3 held by a peer; the staging bytes of one page. */
    long twoHereTwoOnAPeer(long prompt) {
        kit.publish(scope, prompt, 0, 0, 1);
        long pageBytes = QueryKit.stagingBytesOfOnePage();
        peers.held.put(key(prompt, 2), pageBytes);
        peers.held.put(key(prompt, 3), pageBytes);
        return pageBytes;
    }

    static List<PageState> states(Reply.QueryResult r) {
        return r.groups().getFirst().spans().stream().flatMap(s -> s.pages().stream()).map(Reply.PageResult::state).toList();
    }

    @Test
    void aDramHitSettlesFinalAtOnceAndStopReturnsEveryLease() {
        kit.publish(scope, 1, 0, 0, 1, 2);
        QueryOperation op = operation(1, 1, 3, 0, QueryKit.BOUNDS);
        assertThat(kit.start(op)).isEqualTo(Optional.empty());

        assertThat(op.state()).isEqualTo(QueryOperation.State.FINAL);
        Reply.QueryResult r = kit.result(op);
        assertThat(r.status()).isEqualTo(QueryStatus.FINAL);
        assertThat(r.hit()).isTrue();
        assertThat(r.boundaryTokens()).isEqualTo(3 * QueryKit.PAGE_TOKENS);
        assertThat(states(r)).containsOnly(PageState.RESIDENT).hasSize(3);
        assertThat(kit.metrics.pending).as("never PENDING").isZero();
        assertThat(kit.metrics.settled).singleElement().satisfies(s -> {
            assertThat(s.hit()).isTrue();
            assertThat(s.pages()).isEqualTo(new QueryMetrics.TierCounts(3, 0, 0));
            assertThat(s.durationNanos()).as("no time passed on the injected clock").isZero();
        });
        assertThat(kit.leases.used()).isEqualTo(3);
        assertThat(kit.store.dramUsage().leases()).isEqualTo(3);

        assertThat(kit.stop(op, true)).isEqualTo(new QueryOperation.Stopped(3, true));
        assertThat(op.state()).isEqualTo(QueryOperation.State.ENDED);
        assertThat(kit.session.ended).containsExactly(op);
        assertThat(kit.session.events(1)).as("drained at once: no DRAINED event").isEmpty();
        kit.assertNothingHeld();
    }

    @Test
    void anSsdStagingGoesPendingThenFinalAndGivesItsBytesBack() {
        kit.onSsdOnly(scope, 2, 0, 1, 2);
        QueryOperation op = operation(1, 2, 3, 0, QueryKit.BOUNDS);
        assertThat(kit.start(op)).isEqualTo(Optional.empty());

        Reply.QueryResult pending = kit.result(op);
        assertThat(pending.status()).isEqualTo(QueryStatus.PENDING);
        assertThat(pending.hit()).isTrue();
        assertThat(kit.metrics.pending).isEqualTo(1);
        assertThat(kit.leases.used()).as("lease table entries taken for the whole plan").isEqualTo(3);

        kit.runUntil(() -> op.state() == QueryOperation.State.FINAL);
        assertThat(kit.session.events(1)).containsExactly(CompletionEvent.QUERY_SETTLED);
        Reply.QueryResult r = kit.result(op);
        assertThat(r.status()).isEqualTo(QueryStatus.FINAL);
        assertThat(r.boundaryTokens()).isEqualTo(3 * QueryKit.PAGE_TOKENS);
        assertThat(states(r)).containsOnly(PageState.RESIDENT);
        assertThat(kit.metrics.settled).singleElement()
                .satisfies(s -> assertThat(s.pages()).isEqualTo(new QueryMetrics.TierCounts(0, 3, 0)));
        assertThat(kit.stagingBytes.used()).as("staging bytes back when the stagings landed").isZero();

        assertThat(kit.stop(op, false).drained()).isTrue();
        kit.assertNothingHeld();
    }

    @Test
    void aPeerWaitEndsAtItsBoundWhenTheClockAdvances() {
        kit.publish(scope, 3, 0, 0, 1);
        QueryOperation op = operation(1, 3, 4, 50, QueryKit.BOUNDS);
        assertThat(kit.start(op)).isEqualTo(Optional.empty());

        assertThat(op.state()).isEqualTo(QueryOperation.State.PENDING);
        assertThat(peers.discovered).as("one lookup of every missing page").containsExactly(List.of(key(3, 2), key(3, 3)));
        assertThat(kit.leases.used()).as("holds nothing while the catalog is asked").isZero();
        assertThat(kit.result(op).status()).isEqualTo(QueryStatus.PENDING);

        kit.clock.advance(WAIT_NANOS - 1);
        assertThat(op.state()).as("1 ns before the bound").isEqualTo(QueryOperation.State.PENDING);
        kit.clock.advance(1);
        assertThat(op.state()).isEqualTo(QueryOperation.State.FINAL);
        Reply.QueryResult r = kit.result(op);
        assertThat(r.boundaryTokens()).as("what local tiers hold").isEqualTo(2 * QueryKit.PAGE_TOKENS);
        assertThat(kit.session.events(1)).containsExactly(CompletionEvent.QUERY_SETTLED);
        assertThat(kit.metrics.peerWaits).containsExactly(java.util.Map.entry(QueryMetrics.PeerWaitOutcome.EXPIRED, 1));
        assertThat(kit.metrics.settled).singleElement()
                .satisfies(s -> assertThat(s.durationNanos()).as("the injected clock's time").isEqualTo(WAIT_NANOS));

        peers.catalog.complete(null); // a late answer changes nothing
        kit.runCallbacks();
        assertThat(op.state()).isEqualTo(QueryOperation.State.FINAL);
        assertThat(peers.fetches).isEmpty();
        assertThat(kit.metrics.settled).hasSize(1);

        assertThat(kit.stop(op, true).drained()).isTrue();
        assertThat(kit.metrics.peerWaits).hasSize(1);
        kit.assertNothingHeld();
    }

    @Test
    void peerFetchesInFlightAtTheBoundAreAbandonedAndTheStopDrainsWhenTheyLand() {
        long pageBytes = twoHereTwoOnAPeer(4);
        peers.catalog.complete(null);
        QueryOperation op = operation(1, 4, 4, 50, QueryKit.BOUNDS);
        kit.start(op);
        assertThat(kit.result(op).status()).isEqualTo(QueryStatus.PENDING);
        kit.runCallbacks(); // the catalog's answer: plan again with the peers, fetch both pages in one batch

        assertThat(op.state()).isEqualTo(QueryOperation.State.PENDING);
        assertThat(peers.fetches).hasSize(2);
        assertThat(kit.stagingBytes.used()).isEqualTo(2 * pageBytes);
        assertThat(kit.leases.used()).isEqualTo(4);

        kit.clock.advance(WAIT_NANOS);
        assertThat(op.state()).as("settled from local tiers at the bound").isEqualTo(QueryOperation.State.FINAL);
        assertThat(kit.result(op).boundaryTokens()).isEqualTo(2 * QueryKit.PAGE_TOKENS);
        assertThat(kit.leases.used()).isEqualTo(2);
        assertThat(kit.stagingBytes.used()).as("abandoned fetches hold their bytes until they land").isEqualTo(2 * pageBytes);

        QueryOperation.Stopped stopped = kit.stop(op, true);
        assertThat(stopped).isEqualTo(new QueryOperation.Stopped(2, false));
        assertThat(op.state()).isEqualTo(QueryOperation.State.DRAINING);

        kit.publish(scope, key(4, 2));
        Lease late = (Lease) kit.store.acquire(key(4, 2), scope.namespaceId()); // a fetch that lands with a lease: released on arrival
        peers.fetches.get(0).result().complete(new StageResult.Staged(late, StageResult.Source.PEER_READ));
        kit.runCallbacks();
        assertThat(op.state()).as("one fetch still in flight").isEqualTo(QueryOperation.State.DRAINING);
        peers.fetches.get(1).miss();
        kit.runCallbacks();

        assertThat(op.state()).isEqualTo(QueryOperation.State.ENDED);
        assertThat(kit.session.events(1)).containsExactly(CompletionEvent.QUERY_SETTLED, CompletionEvent.DRAINED);
        assertThat(kit.session.ended).containsExactly(op);
        assertThat(kit.metrics.peerWaits).containsExactly(java.util.Map.entry(QueryMetrics.PeerWaitOutcome.EXPIRED, 1));
        assertThat(kit.metrics.phases).as("a wait that expired times its discovery only")
                .extracting(java.util.Map.Entry::getKey).containsExactly(QueryMetrics.PeerWaitPhase.DISCOVERY);
        kit.assertNothingHeld();
    }

    /** A settled first-query peer hit times its two phases: arrival to the catalog's answer, then to settled. */
    @Test
    void aSettledPeerWaitTimesItsDiscoveryAndItsFetches() {
        long pageBytes = twoHereTwoOnAPeer(6);
        QueryOperation op = operation(1, 6, 4, 50, QueryKit.BOUNDS);
        kit.start(op);
        kit.clock.advance(3_000_000);
        peers.catalog.complete(null);
        kit.runCallbacks();
        assertThat(kit.metrics.phases).containsExactly(java.util.Map.entry(QueryMetrics.PeerWaitPhase.DISCOVERY, 3_000_000L));
        assertThat(peers.fetches).hasSize(2);

        kit.clock.advance(5_000_000);
        for (int page = 2; page <= 3; page++) {
            kit.publish(scope, key(6, page));
            Lease staged = (Lease) kit.store.acquire(key(6, page), scope.namespaceId());
            peers.fetches.get(page - 2).result().complete(new StageResult.Staged(staged, StageResult.Source.PEER_READ));
        }
        kit.runCallbacks();

        assertThat(op.state()).isEqualTo(QueryOperation.State.FINAL);
        assertThat(kit.result(op).boundaryTokens()).isEqualTo(4 * QueryKit.PAGE_TOKENS);
        assertThat(kit.metrics.phases).containsExactly(java.util.Map.entry(QueryMetrics.PeerWaitPhase.DISCOVERY, 3_000_000L),
                java.util.Map.entry(QueryMetrics.PeerWaitPhase.FETCH, 5_000_000L));
        assertThat(kit.metrics.peerWaits).containsExactly(java.util.Map.entry(QueryMetrics.PeerWaitOutcome.SETTLED, 1));
        assertThat(kit.stop(op, true).drained()).isTrue();
        kit.assertNothingHeld();
    }

    @Test
    void peerFetchesFromCachedCandidatesEndAtTheBoundToo() {
        kit.publish(scope, 9, 0, 0, 1);
        long pageBytes = QueryKit.stagingBytesOfOnePage();
        peers.know(key(9, 2), pageBytes); // an earlier QUERY's lookup named the peer: no lookup now
        peers.know(key(9, 3), pageBytes);
        QueryOperation op = operation(1, 9, 4, 50, QueryKit.BOUNDS);
        kit.start(op);
        assertThat(kit.result(op).status()).isEqualTo(QueryStatus.PENDING);
        assertThat(peers.discovered).as("the candidates were known").isEmpty();
        assertThat(peers.fetches).as("both pages fetched at once").hasSize(2);

        kit.clock.advance(WAIT_NANOS - 1);
        assertThat(op.state()).as("1 ns before the bound").isEqualTo(QueryOperation.State.PENDING);
        kit.clock.advance(1);
        assertThat(op.state()).as("the frozen peer does not hold it past the bound").isEqualTo(QueryOperation.State.FINAL);
        assertThat(kit.session.events(1)).containsExactly(CompletionEvent.QUERY_SETTLED);
        assertThat(kit.result(op).boundaryTokens()).as("what local tiers hold").isEqualTo(2 * QueryKit.PAGE_TOKENS);
        assertThat(kit.leases.used()).isEqualTo(2);
        assertThat(kit.stagingBytes.used()).as("abandoned fetches hold their bytes until they land").isEqualTo(2 * pageBytes);
        assertThat(kit.metrics.peerWaits).containsExactly(java.util.Map.entry(QueryMetrics.PeerWaitOutcome.EXPIRED, 1));

        for (QueryKit.Peers.Fetch f : peers.fetches) f.miss(); // the transport's own deadline, later
        kit.runCallbacks();
        assertThat(op.state()).isEqualTo(QueryOperation.State.FINAL);
        assertThat(kit.stagingBytes.used()).isZero();
        assertThat(kit.stop(op, true).drained()).isTrue();
        assertThat(kit.metrics.settled).hasSize(1);
        kit.assertNothingHeld();
    }

    @Test
    void peerFetchesFromCachedCandidatesThatLandBeforeTheBoundCountTheWaitSettled() {
        kit.publish(scope, 10, 0, 0, 1);
        long pageBytes = QueryKit.stagingBytesOfOnePage();
        peers.know(key(10, 2), pageBytes);
        QueryOperation op = operation(1, 10, 3, 50, QueryKit.BOUNDS);
        kit.start(op);
        assertThat(peers.fetches).hasSize(1);
        kit.publish(scope, key(10, 2));
        Lease staged = (Lease) kit.store.acquire(key(10, 2), scope.namespaceId());
        peers.fetches.getFirst().result().complete(new StageResult.Staged(staged, StageResult.Source.PEER_READ));
        kit.runCallbacks();

        assertThat(op.state()).isEqualTo(QueryOperation.State.FINAL);
        assertThat(kit.result(op).boundaryTokens()).isEqualTo(3 * QueryKit.PAGE_TOKENS);
        assertThat(kit.metrics.peerWaits).containsExactly(java.util.Map.entry(QueryMetrics.PeerWaitOutcome.SETTLED, 1));
        assertThat(kit.metrics.phases).as("no lookup ran: the fetch phase only, from the arrival")
                .extracting(java.util.Map.Entry::getKey).containsExactly(QueryMetrics.PeerWaitPhase.FETCH);
        kit.clock.advance(WAIT_NANOS); // the timer was stopped: nothing changes
        assertThat(kit.metrics.peerWaits).containsExactly(java.util.Map.entry(QueryMetrics.PeerWaitOutcome.SETTLED, 1));
        assertThat(kit.stop(op, true).drained()).isTrue();
        kit.assertNothingHeld();
    }

    @Test
    void cancelDropsQueuedStagingsAtOnceAndDrainsTheSubmittedOnes() {
        long pageBytes = QueryKit.stagingBytesOfOnePage();
        for (long p = 0; p < 5; p++) peers.know(key(5, p), pageBytes);
        peers.discoverable = false;
        QueryServices.Bounds twoAtATime = new QueryServices.Bounds(16L << 20, 2, 4, TimeUnit.SECONDS.toNanos(5));
        QueryOperation op = operation(1, 5, 5, 0, twoAtATime);
        kit.start(op);
        assertThat(kit.result(op).status()).isEqualTo(QueryStatus.PENDING);

        assertThat(op.state()).isEqualTo(QueryOperation.State.PENDING);
        assertThat(peers.fetches).as("one batch of stagesPerOperation pages").hasSize(2);
        assertThat(kit.stagingBytes.used()).as("taken for all five").isEqualTo(5 * pageBytes);

        assertThat(kit.stop(op, true)).isEqualTo(new QueryOperation.Stopped(0, false));
        assertThat(kit.stagingBytes.used()).as("the three queued pages' bytes back at once").isEqualTo(2 * pageBytes);
        assertThat(kit.leases.used()).as("lease table entries held until the drain").isEqualTo(5);
        for (QueryKit.Peers.Fetch f : peers.fetches) f.miss();
        kit.runCallbacks();

        assertThat(op.state()).isEqualTo(QueryOperation.State.ENDED);
        assertThat(peers.fetches).as("nothing submitted after the stop").hasSize(2);
        assertThat(kit.session.events(1)).containsExactly(CompletionEvent.DRAINED);
        assertThat(kit.metrics.settled).as("stopped before it settled").isEmpty();
        assertThat(kit.metrics.peerWaits).as("it never waited for peers").isEmpty();
        kit.assertNothingHeld();
    }

    @Test
    void aFailedStagingIsSelectedAgainWithoutThatPage() {
        kit.publish(scope, 6, 0, 0);
        long pageBytes = QueryKit.stagingBytesOfOnePage();
        peers.know(key(6, 1), pageBytes);
        peers.know(key(6, 2), pageBytes);
        peers.discoverable = false;
        QueryOperation op = operation(1, 6, 3, 0, QueryKit.BOUNDS);
        kit.start(op);
        assertThat(kit.result(op).status()).isEqualTo(QueryStatus.PENDING);
        assertThat(peers.fetches).hasSize(2);

        peers.fetches.get(0).miss(); // page 1 fails: no legal boundary passes it
        kit.publish(scope, key(6, 2));
        Lease staged = (Lease) kit.store.acquire(key(6, 2), scope.namespaceId());
        peers.fetches.get(1).result().complete(new StageResult.Staged(staged, StageResult.Source.PEER_READ));
        kit.runCallbacks();

        assertThat(op.state()).isEqualTo(QueryOperation.State.FINAL);
        Reply.QueryResult r = kit.result(op);
        assertThat(r.hit()).isTrue();
        assertThat(r.boundaryTokens()).as("page 0 only").isEqualTo(QueryKit.PAGE_TOKENS);
        assertThat(kit.leases.used()).isEqualTo(1);
        assertThat(kit.stop(op, false).drained()).isTrue();
        kit.assertNothingHeld();
    }

    QueryOperation restoring(long op, long prompt, int pages, QueryServices.Bounds bounds) {
        Request.Query q = QueryKit.queryFull(op, prompt, pages, 0);
        return new QueryOperation(kit.services(peers, bounds), kit.session, new Request.Query(op, 0,
                CompletionTarget.ENGINE_RESTORE, q.promptTokens(), 0, q.groups()), scope);
    }

    static Request.Restore restore(long op, int region, int pages) {
        List<Request.RestorePage> out = new java.util.ArrayList<>();
        for (int p = 0; p < pages; p++) out.add(new Request.RestorePage(0, p, p));
        return new Request.Restore(op, region, out);
    }

    @Test
    void aRestoreOfAFinalHitCopiesItsPagesOnceAndMarksThemReady() throws Exception {
        kit.publish(scope, 7, 0, 0, 1, 2);
        QueryOperation op = restoring(1, 7, 3, QueryKit.BOUNDS);
        kit.start(op);
        try (EngineRegion region = QueryKit.region(dir.resolve("regions"), 24 * 1024, 4)) {
            QueryOperation.Restoring started;
            synchronized (kit.session.lock()) {
                started = op.restore(restore(1, 0, 3), region);
            }
            assertThat(started.reply()).isEqualTo(new Reply.RestoreAccepted(1, 3));
            started.copyHere().run(); // inline: on the caller's thread, after the lock

            assertThat(kit.session.events).singleElement().satisfies(e -> {
                assertThat(e.event()).isEqualTo(CompletionEvent.RESTORE_DONE);
                assertThat(e.outcome()).isEqualTo(Reply.Settled.OK);
            });
            assertThat(kit.metrics.restores).containsExactly(QueryMetrics.RestoreOutcome.OK);
            for (int p = 0; p < 3; p++) {
                assertThat(region.page(p, QueryKit.PAGE_BYTES).toArray(ValueLayout.JAVA_BYTE)).as("page %d", p)
                        .isEqualTo(QueryKit.image(key(7, p)));
            }
            assertThat(states(kit.result(op))).containsOnly(PageState.READY);
            synchronized (kit.session.lock()) {
                assertThat(op.restore(restore(1, 0, 1), region).reply()).as("each leased page is restored once")
                        .extracting(r -> ((Reply.Error) r).code()).isEqualTo(ErrorCode.INVALID_DEMAND);
            }
            assertThat(kit.stop(op, true)).isEqualTo(new QueryOperation.Stopped(3, true));
        }
        kit.assertNothingHeld();
    }

    @Test
    void aStopDuringACopierRestoreKeepsItsLeasesUntilTheCopiesEndThenDrains() throws Exception {
        kit.publish(scope, 8, 0, 0, 1);
        QueryServices.Bounds copierOnly = new QueryServices.Bounds(0, 64, 4, TimeUnit.SECONDS.toNanos(5));
        QueryOperation op = restoring(1, 8, 2, copierOnly);
        kit.start(op);
        CountDownLatch gate = new CountDownLatch(1);
        Runnable hold = () -> {
            try {
                gate.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        };
        assertThat(kit.copier.trySubmit(List.of(hold, hold))).as("both copy threads held").isTrue();
        try (EngineRegion region = QueryKit.region(dir.resolve("regions"), 24 * 1024, 2)) {
            synchronized (kit.session.lock()) {
                assertThat(op.restore(restore(1, 0, 2), region).reply()).isEqualTo(new Reply.RestoreAccepted(1, 2));
            }
            assertThat(kit.stop(op, true)).as("the copies still read the leases").isEqualTo(new QueryOperation.Stopped(0, false));
            assertThat(kit.store.dramUsage().leases()).isEqualTo(2);
            gate.countDown();
            kit.runUntil(() -> op.state() == QueryOperation.State.ENDED);
        }
        assertThat(kit.session.events(1)).containsExactly(CompletionEvent.RESTORE_DONE, CompletionEvent.DRAINED);
        assertThat(kit.session.events.getFirst().outcome()).isEqualTo(Reply.Settled.CANCELLED);
        assertThat(kit.metrics.restores).containsExactly(QueryMetrics.RestoreOutcome.CANCELLED);
        kit.assertNothingHeld();
    }
}
