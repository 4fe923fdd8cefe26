package io.orbitkv.core.query;

import io.orbitkv.state.Namespace;
import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * PREPARE on the query layer with a hand-advanced clock ({@link QueryKit}): a prepared prefix is
 * served by the later QUERY from DRAM at once; the speculation budget returns to 0 after
 * consumption, cancellation (in-flight reads drained first) and expiry; a prepare over budget is
 * trimmed or refused; QUERY stagings are never held back by prepare reads.
 */
class PrepareOperationTest {

    static final Namespace NS = QueryKit.namespace("prepare");
    static final long PAGE = QueryKit.stagingBytesOfOnePage();

    @TempDir
    Path dir;
    QueryKit kit;
    SessionScope scope;
    Speculation.SessionBudgets session;
    final QueryKit.Peers peers = new QueryKit.Peers();
    final List<PrepareOperation> ended = new CopyOnWriteArrayList<>();

    @BeforeEach
    void open() throws Exception {
        kit = new QueryKit(dir);
        scope = kit.scope(NS, 1, QueryKit.FULL);
        session = kit.speculation.sessionBudgets();
    }

    @AfterEach
    void close() {
        kit.close();
    }

    PrepareOperation prepare(long op, long prompt, int pages, int firstUseMillis) {
        Request.Query q = QueryKit.queryFull(op, prompt, pages, 0);
        return new PrepareOperation(kit.services(peers, QueryKit.BOUNDS), session, kit.session,
                new Request.Prepare(op, firstUseMillis, 7, q.promptTokens(), q.originTokens(), q.groups()), scope, ended::add);
    }

    Reply.Prepared start(PrepareOperation op) {
        synchronized (kit.session.lock()) {
            return op.start();
        }
    }

    QueryOperation.Stopped stop(PrepareOperation op) {
        synchronized (kit.session.lock()) {
            return op.stop(true, PrepareAccounting.Release.UNUSED);
        }
    }

    QueryOperation query(long op, long prompt, int pages) {
        return new QueryOperation(kit.services(peers, QueryKit.BOUNDS), kit.session, QueryKit.queryFull(op, prompt, pages, 0),
                scope);
    }

    PrepareAccounting.Counts counts() {
        return kit.speculation.accounting().snapshot().stream().filter(c -> c.namespaceId() == 1).findFirst().orElseThrow();
    }

    void assertBudgetsBack() {
        assertThat(kit.speculation.inFlight().used()).as("speculation in flight").isZero();
        assertThat(kit.speculation.held().used()).as("speculation held").isZero();
        assertThat(session.inFlight().used()).as("session in flight").isZero();
        assertThat(session.held().used()).as("session held").isZero();
        assertThat(kit.speculation.heldPages()).isZero();
        assertThat(kit.speculation.prepares()).isZero();
        kit.assertNothingHeld();
    }

    @Test
    void aPreparedPrefixOnSsdIsServedByTheLaterQueryFromDramAtOnce() {
        kit.onSsdOnly(scope, 1, 0, 1, 2);
        kit.onSsdOnly(scope, 2, 0, 1, 2);
        PrepareOperation prep = prepare(10, 1, 3, 0);
        Reply.Prepared answer = start(prep);
        assertThat(answer).isEqualTo(new Reply.Prepared(10, Reply.PrepareOutcome.ACCEPTED, 3, 0, 0, 3 * PAGE));
        assertThat(kit.leases.used()).as("no engine lease for a prepare").isZero();
        kit.runUntil(() -> prep.state() == PrepareOperation.State.HOLDING);
        assertThat(kit.speculation.heldPages()).isEqualTo(3);
        assertThat(kit.speculation.inFlight().used()).as("landed: nothing in flight").isZero();
        assertThat(kit.speculation.held().used()).isEqualTo(3 * PAGE);
        assertThat(kit.store.dramUsage().leases()).as("the Manager's own holds").isEqualTo(3);

        QueryOperation warm = query(1, 1, 3);
        assertThat(kit.start(warm)).isEqualTo(Optional.empty());
        assertThat(warm.state()).as("FINAL at once: every page already in DRAM").isEqualTo(QueryOperation.State.FINAL);
        assertThat(kit.result(warm).boundaryTokens()).isEqualTo(3 * QueryKit.PAGE_TOKENS);
        assertThat(kit.metrics.pending).as("no staging").isZero();
        assertThat(kit.metrics.settled.getLast().pages()).isEqualTo(new QueryMetrics.TierCounts(3, 0, 0));

        QueryOperation cold = query(2, 2, 3);
        kit.start(cold);
        assertThat(kit.result(cold).status()).as("the same demand unprepared is staged").isEqualTo(QueryStatus.PENDING);
        kit.runUntil(() -> cold.state() == QueryOperation.State.FINAL);
        assertThat(kit.metrics.settled.getLast().pages()).isEqualTo(new QueryMetrics.TierCounts(0, 3, 0));

        kit.runUntil(() -> prep.state() == PrepareOperation.State.ENDED);
        assertThat(ended).containsExactly(prep);
        assertThat(counts().consumed()).isEqualTo(3);
        assertThat(counts().preparedSsd()).isEqualTo(3);
        assertThat(counts().releasedUnused()).isZero();
        kit.stop(warm, false);
        kit.stop(cold, false);
        assertBudgetsBack();
    }

    @Test
    void cancelDrainsTheReadsInFlightBeforeTheBudgetComesBack() {
        kit.onSsdOnly(scope, 3, 0, 1, 2, 3);
        PrepareOperation prep = prepare(11, 3, 4, 0);
        assertThat(start(prep).pagesToStage()).isEqualTo(4);
        QueryOperation.Stopped stopped = stop(prep);
        if (!stopped.drained()) {
            assertThat(kit.speculation.held().used()).as("reads in flight still count").isPositive();
            kit.runUntil(() -> prep.state() == PrepareOperation.State.ENDED);
            assertThat(kit.session.events(11)).containsExactly(CompletionEvent.DRAINED);
        }
        assertThat(prep.state()).isEqualTo(PrepareOperation.State.ENDED);
        assertBudgetsBack();
        assertThat(kit.speculation.accounting().snapshot()).as("nothing was ever held, so nothing consumed")
                .allSatisfy(c -> assertThat(c.consumed()).isZero());
    }

    @Test
    void aPrepareWaitsForItsDeadlineAndACancelBeforeItStagesNothing() {
        kit.onSsdOnly(scope, 4, 0, 1);
        PrepareOperation prep = prepare(12, 4, 2, 10_000);
        Reply.Prepared answer = start(prep);
        assertThat(answer.startDelayMillis()).as("starts at first use - estimate - margin").isBetween(9_000, 10_000);
        kit.clock.advance(TimeUnit.SECONDS.toNanos(5));
        assertThat(prep.state()).isEqualTo(PrepareOperation.State.WAITING);
        assertThat(kit.store.inflightStagings()).isZero();
        assertThat(stop(prep)).isEqualTo(new QueryOperation.Stopped(0, true));
        assertBudgetsBack();
    }

    @Test
    void preparedPagesExpireAfterFirstUsePlusTheGrace() {
        kit.onSsdOnly(scope, 5, 0, 1);
        PrepareOperation prep = prepare(13, 5, 2, 1_000);
        start(prep);
        kit.clock.advance(TimeUnit.SECONDS.toNanos(1));
        kit.runUntil(() -> prep.state() == PrepareOperation.State.HOLDING);
        assertThat(kit.speculation.held().used()).isEqualTo(2 * PAGE);
        kit.clock.advance(kit.speculation.bounds().graceNanos());
        assertThat(prep.state()).isEqualTo(PrepareOperation.State.ENDED);
        assertThat(counts().expired()).isEqualTo(2);
        assertThat(counts().byteSecondsHeld()).isPositive();
        assertBudgetsBack();
    }

    @Test
    void aPrepareOverBudgetIsTrimmedThenRefusedAndCounted() {
        kit.speculation = new Speculation(SpeculationBounds.DEFAULTS.withBudgets(64 * PAGE, 64 * PAGE, 64 * PAGE, 2 * PAGE),
                kit.clock::now);
        session = kit.speculation.sessionBudgets();
        kit.onSsdOnly(scope, 6, 0, 1, 2, 3);
        PrepareOperation first = prepare(14, 6, 4, 0);
        Reply.Prepared trimmed = start(first);
        assertThat(trimmed.outcome()).isEqualTo(Reply.PrepareOutcome.TRIMMED);
        assertThat(trimmed.pagesToStage()).isEqualTo(2);
        assertThat(session.held().used()).isEqualTo(2 * PAGE);
        PrepareOperation second = prepare(15, 6, 4, 0);
        assertThat(start(second)).isEqualTo(new Reply.Prepared(15, Reply.PrepareOutcome.REFUSED, 0, 0, 0, 0));
        assertThat(second.state()).isEqualTo(PrepareOperation.State.ENDED);
        assertThat(counts().trimmed()).isEqualTo(1);
        assertThat(counts().refused()).isEqualTo(1);
        kit.runUntil(() -> first.state() == PrepareOperation.State.HOLDING);
        assertThat(stop(first).pagesReleased()).isEqualTo(2);
        assertThat(counts().releasedUnused()).isEqualTo(2);
        assertBudgetsBack();
    }

    @Test
    void queryStagingsAreNeverHeldBackAndPrepareReadsWaitForThem() {
        kit.speculation = new Speculation(new SpeculationBounds(64 * PAGE, 64 * PAGE, 64 * PAGE, 64 * PAGE, 16, 1,
                0, TimeUnit.SECONDS.toNanos(2), TimeUnit.SECONDS.toNanos(60), 1_000_000_000L), kit.clock::now);
        session = kit.speculation.sessionBudgets();
        for (int p = 0; p < 3; p++) peers.know(QueryKit.key(NS, 7, 0, p), PAGE);
        for (int p = 0; p < 3; p++) peers.know(QueryKit.key(NS, 8, 0, p), PAGE);
        PrepareOperation prep = prepare(16, 7, 3, 0);
        assertThat(start(prep).pagesToStage()).isEqualTo(3);
        assertThat(peers.fetches).as("one prepare read at a time (stagesPerPrepare 1)").hasSize(1);

        QueryOperation demand = query(1, 8, 3);
        kit.start(demand);
        assertThat(peers.fetches).as("the QUERY's reads are submitted at once, beside the prepare's").hasSize(4);
        assertThat(kit.stagingBytes.used()).isEqualTo(3 * PAGE);
        peers.fetches.getFirst().miss();
        kit.runCallbacks();
        assertThat(peers.fetches).as("no new prepare read while a QUERY stages").hasSize(4);
        assertThat(kit.speculation.resumeWaiting(kit.stagingBytes.used() == 0)).isEmpty();

        peers.fetches.subList(1, 4).forEach(QueryKit.Peers.Fetch::miss);
        kit.runUntil(() -> demand.state() == QueryOperation.State.FINAL);
        assertThat(kit.stagingBytes.used()).isZero();
        List<PrepareOperation> resumed = kit.speculation.resumeWaiting(true);
        assertThat(resumed).containsExactly(prep);
        resumed.forEach(PrepareOperation::resumeLocked);
        assertThat(peers.fetches).as("resumed once the QUERY's stagings landed").hasSize(5);
        for (int n = 5; n <= 6; n++) {
            peers.fetches.getLast().miss();
            kit.runCallbacks();
            assertThat(peers.fetches).hasSize(Math.min(n + 1, 6));
        }
        kit.runUntil(() -> prep.state() == PrepareOperation.State.ENDED);
        kit.stop(demand, false);
        assertBudgetsBack();
    }
}
