package io.orbitkv.core.query;

import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.Hashes;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.List;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@link QueryPlanner} against a real store: the legal boundary of a hybrid contract and exactly
 * its required pages, namespace isolation, the QUERY checks, the staging cap, and the pages a
 * peer might add.
 */
class QueryPlannerTest {

    static final Namespace NS = QueryKit.namespace("model-planner");
    static final Namespace OTHER = QueryKit.namespace("model-other");
    static final RecoveryContract HYBRID = new RecoveryContract(16, List.of(new StateGroup.Full(0),
            new StateGroup.SlidingWindow(1, 32, 16), new StateGroup.Recurrent(2)));

    @TempDir
    Path dir;
    QueryKit kit;
    QueryPlanner planner;

    @BeforeEach
    void open() throws Exception {
        kit = new QueryKit(dir);
        planner = new QueryPlanner(kit.store);
    }

    @AfterEach
    void close() {
        kit.close();
    }

    QueryPlan plan(Request.Query query, SessionScope scope) {
        return planner.plan(query, scope, Set.of(), QueryPlanner.Sources.ALL, Long.MAX_VALUE);
    }

    static List<long[]> spans(QueryPlan.Hit hit, int group) {
        return hit.spans().stream().filter(s -> s.groupId() == group)
                .map(s -> new long[] {s.firstPage(), s.firstPage() + s.pages().length}).toList();
    }

    @Test
    void selectsTheLegalBoundaryOfAHybridContractAndLeasesExactlyItsRequiredPages() {
        SessionScope scope = kit.scope(NS, 1, HYBRID);
        kit.publish(scope, 5, 0, 0, 1, 2, 3, 4, 5, 6, 7);
        kit.publish(scope, 5, 1, 0, 1, 2, 3, 4, 5, 6, 7);
        kit.publish(scope, 5, 2, 4); // only the checkpoint at token 80
        Request.Query query = QueryKit.query(1, 5, new int[] {0, 1, 2}, 8, 0);
        assertThat(planner.check(query, scope)).isEmpty();

        QueryPlan plan = plan(query, scope);
        assertThat(plan).isInstanceOf(QueryPlan.Hit.class);
        QueryPlan.Hit hit = (QueryPlan.Hit) plan;
        assertThat(hit.boundaryTokens()).as("attention alone would reach 128").isEqualTo(80);
        assertThat(spans(hit, 0)).containsExactly(new long[] {0, 5});
        assertThat(spans(hit, 1)).as("sink page 0 and window pages 3..4").containsExactly(new long[] {0, 1},
                new long[] {3, 5});
        assertThat(spans(hit, 2)).containsExactly(new long[] {4, 5});
        assertThat(hit.stagingBytes()).isZero();
        assertThat(kit.store.dramUsage().leases()).as("exactly the required ranges").isEqualTo(5 + 3 + 1);

        hit.releaseAll();
        assertThat(kit.store.dramUsage().leases()).isZero();
    }

    @Test
    void aPageOfAnotherNamespaceIsAMissEvenWhenTheQueryNamesItsKey() {
        SessionScope mine = kit.scope(NS, 1, QueryKit.FULL);
        SessionScope other = kit.scope(OTHER, 2, QueryKit.FULL);
        StateKey key = QueryKit.key(NS, 9, 0, 0);
        kit.publish(mine, key);
        Request.Query byKey = new Request.Query(1, 0, CompletionTarget.HOST_READY, QueryKit.PAGE_TOKENS + 1, 0,
                List.of(new Request.QueryGroup(0, KeyForm.STATE_KEY, Hashes.ofKeys(List.of(key)))));

        assertThat(plan(byKey, other)).as("another namespace's image").isInstanceOf(QueryPlan.Miss.class);
        assertThat(kit.store.dramUsage().leases()).as("its lease let go at once").isZero();
        assertThat(plan(QueryKit.queryFull(2, 9, 1, 0), other)).as("block hashes derive other keys")
                .isInstanceOf(QueryPlan.Miss.class);

        QueryPlan own = plan(byKey, mine);
        assertThat(own).isInstanceOf(QueryPlan.Hit.class);
        ((QueryPlan.Hit) own).releaseAll();
    }

    @Test
    void checkRefusesWhatDoesNotFitTheContract() {
        SessionScope scope = kit.scope(NS, 1, HYBRID);
        Request.Query strangeGroup = QueryKit.query(1, 1, new int[] {0, 1, 2, 7}, 2, 0);
        assertThat(planner.check(strangeGroup, scope)).get().extracting(Reply.Error::code)
                .isEqualTo(ErrorCode.NAMESPACE_MISMATCH);

        Request.Query missingGroup = QueryKit.query(1, 1, new int[] {0, 1}, 2, 0);
        assertThat(planner.check(missingGroup, scope)).get().extracting(Reply.Error::code)
                .isEqualTo(ErrorCode.INVALID_DEMAND);

        Request.Query full = QueryKit.query(1, 1, new int[] {0, 1, 2}, 2, 0);
        Request.Query offPage = new Request.Query(1, 0, CompletionTarget.HOST_READY, full.promptTokens(), 5,
                full.groups());
        assertThat(planner.check(offPage, scope)).get().extracting(Reply.Error::code)
                .isEqualTo(ErrorCode.INVALID_DEMAND);
    }

    @Test
    void pagesToStageStopAtTheStagingCapForTheLongestBoundaryThatFits() {
        SessionScope scope = kit.scope(NS, 1, QueryKit.FULL);
        kit.onSsdOnly(scope, 3, 0, 1, 2, 3);
        long page = QueryKit.stagingBytesOfOnePage();

        QueryPlan capped = planner.plan(QueryKit.queryFull(1, 3, 4, 0), scope, Set.of(), QueryPlanner.Sources.ALL,
                2 * page + page / 2);
        assertThat(capped).isInstanceOf(QueryPlan.Hit.class);
        assertThat(((QueryPlan.Hit) capped).boundaryTokens()).isEqualTo(2 * QueryKit.PAGE_TOKENS);
        assertThat(((QueryPlan.Hit) capped).stagingBytes()).isEqualTo(2 * page);

        assertThat(planner.plan(QueryKit.queryFull(1, 3, 4, 0), scope, Set.of(), QueryPlanner.Sources.DRAM, 0))
                .as("nothing in DRAM").isInstanceOf(QueryPlan.Miss.class);
        assertThat(planner.plan(QueryKit.queryFull(1, 3, 4, 0), scope, Set.of(QueryKit.key(NS, 3, 0, 1)),
                QueryPlanner.Sources.ALL, Long.MAX_VALUE)).as("an excluded key counts as missing")
                .satisfies(p -> assertThat(((QueryPlan.Hit) p).boundaryTokens()).isEqualTo(QueryKit.PAGE_TOKENS));
        assertThat(kit.store.dramUsage().leases()).isZero();
    }

    @Test
    void missingLocallyNamesThePagesAboveThePlanThatNoLocalTierHolds() {
        SessionScope scope = kit.scope(NS, 1, QueryKit.FULL);
        kit.publish(scope, 4, 0, 0, 1);
        Request.Query query = QueryKit.queryFull(1, 4, 5, 0);
        QueryPlan plan = plan(query, scope);
        assertThat(((QueryPlan.Hit) plan).boundaryTokens()).isEqualTo(2 * QueryKit.PAGE_TOKENS);

        assertThat(planner.missingLocally(query, scope, plan, 10)).containsExactly(QueryKit.key(NS, 4, 0, 2),
                QueryKit.key(NS, 4, 0, 3), QueryKit.key(NS, 4, 0, 4));
        assertThat(planner.missingLocally(query, scope, plan, 1)).containsExactly(QueryKit.key(NS, 4, 0, 2));
        ((QueryPlan.Hit) plan).releaseAll();
        assertThat(planner.missingLocally(query, scope, new QueryPlan.Miss(List.of()), 10)).as("from the origin")
                .hasSize(3);
    }
}
