package io.orbitkv.router;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class RouterTest {

    /** 4-token blocks of 1,000 bytes: DRAM 1 ms, SSD 10 ms, peer 10 ms per block (+5 ms per request), 100 tokens/s. */
    static final CostModel COST = new CostModel(4, 1_000, 1e6, 1e5, 1e5, 0.005, 100);
    static final long SECOND = 1_000_000_000L;

    static Router router(int workers) {
        return router(workers, RouterSettings.defaults(COST));
    }

    static Router router(int workers, RouterSettings settings) {
        List<String> names = new ArrayList<>();
        for (int i = 0; i < workers; i++) names.add("w" + i);
        return new Router(settings, names);
    }

    static long[] chain(long... ids) {
        long[] k = new long[ids.length];
        for (int i = 0; i < ids.length; i++) k[i] = BlockKeys.of(ids[i]);
        return k;
    }

    static List<IndexEvent> stored(Tier tier, long... ids) {
        return List.of(new IndexEvent.Stored(chain(ids), tier));
    }

    static final RouteRequest FOUR_BLOCKS = new RouteRequest(chain(1, 2, 3, 4), 16);
    static final Policy JOINT = new JointPolicy();
    static final Policy LOAD = new LoadOnlyPolicy();
    static final Policy OVERLAP = new OverlapOnlyPolicy();

    @Test
    void theTermsAreQueuePlusTransferPlusRecompute() {
        Router r = router(3);
        r.onBatch(1, 0, stored(Tier.DRAM, 1, 2), 0);
        r.onBatch(2, 0, stored(Tier.SSD, 3), 0);
        Decision d = r.route(FOUR_BLOCKS, JOINT, 0);
        Candidate w1 = d.candidates().get(1);
        // blocks 1, 2 local DRAM (2 ms); block 3 from w2's SSD (10 + 10 ms) + 5 ms fixed; block 4 recomputed (4 tokens, 40 ms)
        assertThat(w1.coverage()).isEqualTo(new Coverage(2, 0, 0, 1, 2));
        assertThat(w1.transferSeconds()).isCloseTo(0.002 + 0.020 + 0.005, org.assertj.core.data.Offset.offset(1e-12));
        assertThat(w1.recomputeTokens()).isEqualTo(4);
        assertThat(w1.recomputeSeconds()).isCloseTo(0.04, org.assertj.core.data.Offset.offset(1e-12));
        Candidate w0 = d.candidates().get(0);
        assertThat(w0.coverage()).isEqualTo(new Coverage(0, 0, 2, 1, 0));
        assertThat(d.worker()).isEqualTo(1);
        assertThat(d.chargedTokens()).isEqualTo(4);
        assertThat(r.status(1, 0).outstandingTokens()).isEqualTo(4);
        assertThat(d.fallback()).isFalse();
    }

    @Test
    void aFullHitStillComputesTheLastToken() {
        Router r = router(1);
        r.onBatch(0, 0, stored(Tier.DRAM, 1, 2, 3, 4), 0);
        Decision d = r.route(FOUR_BLOCKS, JOINT, 0);
        assertThat(d.chosen().recomputeTokens()).isEqualTo(1);
    }

    @Test
    void allThreePoliciesAgreeWhenTheHolderIsIdle() {
        Router r = router(2);
        r.onBatch(1, 0, stored(Tier.DRAM, 1, 2, 3), 0);
        assertThat(r.route(FOUR_BLOCKS, OVERLAP, 0).worker()).isEqualTo(1);
        Router r2 = router(2);
        r2.onBatch(1, 0, stored(Tier.DRAM, 1, 2, 3), 0);
        assertThat(r2.route(FOUR_BLOCKS, JOINT, 0).worker()).isEqualTo(1);
        // load-only is blind to the cache: both are idle, the tie goes to the lower index
        Router r3 = router(2);
        r3.onBatch(1, 0, stored(Tier.DRAM, 1, 2, 3), 0);
        assertThat(r3.route(FOUR_BLOCKS, LOAD, 0).worker()).isEqualTo(0);
    }

    @Test
    void jointLeavesABusyHolderForAnIdleWorkerThatReadsThePrefixFromThePeer() {
        Router r = router(2);
        r.onBatch(1, 0, stored(Tier.DRAM, 1, 2, 3, 4), 0);
        r.route(new RouteRequest(chain(9), 400), LOAD, 0);           // to w0 (tie): 400 tokens, 4 s
        r.route(new RouteRequest(chain(8), 400), LOAD, 0);           // to w1: 4 s of queue on the holder
        r.completed(0, 400, 0, 0, 0);                                     // w0 done, idle again
        List<Candidate> c = r.route(FOUR_BLOCKS, JOINT, 0).candidates();
        assertThat(JOINT.choose(c)).isEqualTo(0);
        assertThat(c.get(0).coverage().peerDramBlocks()).isEqualTo(4);
        assertThat(OVERLAP.choose(c)).isEqualTo(1);
        assertThat(LOAD.choose(c)).isEqualTo(0);
    }

    @Test
    void jointWaitsBrieflyForTheHolderWhenNoPeerCanSupplyThePrefix() {
        Router r = router(2);
        // HBM blocks are readable by their own worker only
        r.onBatch(1, 0, stored(Tier.HBM, 1, 2, 3, 4), 0);
        r.route(new RouteRequest(chain(9), 10), LOAD, 0);   // w0: 10 tokens = 0.1 s
        r.completed(0, 10, 0, 0, 0);
        r.route(new RouteRequest(chain(8), 10), JOINT, 0);  // w0 is idle and not the holder...
        List<Candidate> c = r.route(FOUR_BLOCKS, JOINT, 0).candidates();
        // w0: 0.1 s queue + 16 tokens recomputed (0.16 s); w1: 0 s queue + 1 token (0.01 s)
        assertThat(c.get(0).coverage()).isEqualTo(Coverage.NONE);
        assertThat(JOINT.choose(c)).isEqualTo(1);
        assertThat(OVERLAP.choose(c)).isEqualTo(1);

        Router r2 = router(2);
        r2.onBatch(1, 0, stored(Tier.HBM, 1, 2, 3, 4), 0);
        r2.route(new RouteRequest(chain(8), 10), LOAD, 0);     // w0 0.1 s
        r2.route(new RouteRequest(chain(7), 10), LOAD, 0);     // w1 0.1 s
        r2.route(new RouteRequest(chain(6), 10), LOAD, 0);     // w0 0.2 s
        List<Candidate> c2 = r2.route(FOUR_BLOCKS, JOINT, 0).candidates();
        // w1 holds it behind 0.1 s; w0 would recompute behind 0.2 s: joint takes w1; so does load
        assertThat(JOINT.choose(c2)).isEqualTo(1);
        assertThat(LOAD.choose(c2)).isEqualTo(1);
        r2.route(new RouteRequest(chain(5), 30), LOAD, 0);     // w1 now 0.4 s, w0 0.2 s
        List<Candidate> c3 = r2.route(FOUR_BLOCKS, JOINT, 0).candidates();
        // w1: 0.4 + 0.01 = 0.41 s; w0: 0.2 + 0.16 = 0.36 s, but w0 has the shortest queue and 0.16 s of recompute
        // there raises it to 0.36 s for the next arrival: 0.52 s against 0.41 s, joint waits for w1 this time
        assertThat(JOINT.choose(c3)).isEqualTo(1);
        assertThat(OVERLAP.choose(c3)).isEqualTo(1);
        assertThat(LOAD.choose(c3)).isEqualTo(0);
    }

    @Test
    void jointRecomputesOnTheShortestQueueWhenTheHolderIsFarBehind() {
        Router r = router(2);
        r.onBatch(1, 0, stored(Tier.HBM, 1, 2, 3, 4), 0);
        r.route(new RouteRequest(chain(9), 10), LOAD, 0);      // w0 0.1 s
        r.route(new RouteRequest(chain(8), 100), LOAD, 0);     // w1 1.0 s
        List<Candidate> c = r.route(FOUR_BLOCKS, JOINT, 0).candidates();
        // w0: 0.1 + 0.16 = 0.26 s, + 0.16 s rise = 0.42 s; w1: 1.0 + 0.01 = 1.01 s
        assertThat(JOINT.choose(c)).isEqualTo(0);
        assertThat(OVERLAP.choose(c)).isEqualTo(1);
    }

    static Candidate candidate(int worker, double queueSeconds, double recomputeSeconds) {
        return new Candidate(worker, "w" + worker, true, (long) (queueSeconds * 100), queueSeconds, 0,
                recomputeSeconds, (long) (recomputeSeconds * 100), new Coverage(0, 0, 0, 0, 0));
    }

    @Test
    void theBacklogTermIsZeroWhileAWorkerIsIdle() {
        // w0 idle, w1 holds the prefix behind a queue: with a worker idle, arrivals change nothing
        List<Candidate> c = List.of(candidate(0, 0, 0.16), candidate(1, 0.1, 0.01));
        int before = JOINT.choose(c);
        assertThat(before).isEqualTo(1);   // w0 0.16 + 0.1 rise = 0.26 > w1 0.11
        assertThat(JOINT.choose(c, new Outlook(0, 1_000))).isEqualTo(before);
        // w0 0.16 + 0.16 rise = 0.32 < w1 5.01
        List<Candidate> far = List.of(candidate(0, 0, 0.16), candidate(1, 5, 0.01));
        assertThat(JOINT.choose(far)).isEqualTo(0);
        assertThat(JOINT.choose(far, new Outlook(0, 1_000))).isEqualTo(0);
    }

    @Test
    void underLongQueuesJointPrefersTheWorkerThatAddsTheLeastWork() {
        // w0: 10 s queue, 1 s recompute (12 s with the rise); w1 holds the prefix: 12 s queue, 0.01 s
        List<Candidate> c = List.of(candidate(0, 10, 1.0), candidate(1, 12, 0.01));
        assertThat(JOINT.choose(c)).isEqualTo(0);
        assertThat(JOINT.choose(c, Outlook.NONE)).isEqualTo(0);
        // 4 arrivals expected over 2 workers: 0.99 s extra work x 2 behind = 1.98 s more for w0
        assertThat(JOINT.choose(c, new Outlook(10, 4))).isEqualTo(1);
        // one arrival: 0.99 s x 0.5 = 0.495 s, 12.495 > 12.01; a hundredth of one: 12.005 < 12.01
        assertThat(JOINT.choose(c, new Outlook(10, 1))).isEqualTo(1);
        assertThat(JOINT.choose(c, new Outlook(10, 0.01))).isEqualTo(0);
        // the baselines ignore the outlook
        assertThat(LOAD.choose(c, new Outlook(10, 4))).isEqualTo(0);
    }

    @Test
    void theRouterCountsArrivalsOverTheBacklogsHorizon() {
        // both routers: a 1-token request at 0 s starts the clock; w1 holds the prefix; at 120 s the
        // queues are w0 10.03 s, w1 10.4 s; three small requests were routed at 105 s or at 115 s
        for (long smallAtSeconds : new long[] {105, 115}) {
            Router r = router(2);
            r.route(new RouteRequest(chain(89), 1), LOAD, 0);
            r.completed(0, 1, 0, 0, 0);
            long t0 = 100 * SECOND;
            r.onBatch(1, 0, stored(Tier.HBM, 1, 2, 3, 4), t0);
            r.route(new RouteRequest(chain(90), 3_000), LOAD, t0);
            r.route(new RouteRequest(chain(91), 3_040), LOAD, t0);
            for (int i = 0; i < 3; i++) r.route(new RouteRequest(chain(100 + i), 1), LOAD, smallAtSeconds * SECOND);
            Decision d = r.route(FOUR_BLOCKS, JOINT, 120 * SECOND);
            assertThat(d.candidates().get(0).queueSeconds()).isCloseTo(10.03, org.assertj.core.data.Offset.offset(1e-9));
            assertThat(d.candidates().get(1).queueSeconds()).isCloseTo(10.4, org.assertj.core.data.Offset.offset(1e-9));
            // ρ = (0.01 + 30 + 30.4 + 0.03) s of work / (2 workers × 120 s) = 0.25183; H = 10.03 / (1 − ρ)
            assertThat(d.outlook().horizonSeconds()).isCloseTo(10.03 / (1 - 60.44 / 240), org.assertj.core.data.Offset.offset(1e-9));
            assertThat(d.outlook().horizonSeconds()).isCloseTo(13.406, org.assertj.core.data.Offset.offset(1e-3));
            // no arrivals in the 13.4 s horizon: w0 10.03 + 0.16 + 0.16 rise = 10.35 < w1 10.41; three
            // arrivals over 2 workers add 0.15 s x 1.5 = 0.225 s to w0, which then loses
            assertThat(d.outlook().expectedArrivals()).isEqualTo(smallAtSeconds == 105 ? 0 : 3);
            assertThat(d.worker()).as("small requests at %d s", smallAtSeconds).isEqualTo(smallAtSeconds == 105 ? 0 : 1);
        }
    }

    @Test
    void anOverloadedClusterLooksBackOverEverythingItMeasured() {
        // 60.4 s of work routed over 2 workers in 20 s: ρ > 1, the backlog's end is not in sight
        Router r = router(2);
        r.route(new RouteRequest(chain(90), 3_000), LOAD, 0);
        r.route(new RouteRequest(chain(91), 3_040), LOAD, 0);
        r.route(new RouteRequest(chain(92), 1), LOAD, 10 * SECOND);
        Decision d = r.route(FOUR_BLOCKS, JOINT, 20 * SECOND);
        assertThat(d.outlook().horizonSeconds()).isEqualTo(20.0);
        // the window is the last 20 s, (0 s, 20 s]: the request at 10 s, not the two at 0 s
        assertThat(d.outlook().expectedArrivals()).isEqualTo(1);
        // a worker idle: no backlog at all
        Decision idle = router(2).route(FOUR_BLOCKS, JOINT, 20 * SECOND);
        assertThat(idle.outlook().horizonSeconds()).isZero();
        assertThat(idle.outlook().expectedArrivals()).isZero();
    }

    @Test
    void theReuseOfAStoredBlockIsMeasuredFromDecisionsAndMemoryEvents() {
        Router r = router(2);
        assertThat(r.route(FOUR_BLOCKS, LOAD, 0).outlook().reuseSecondsPerBlock()).isZero();
        // 4 blocks into w1's host DRAM, 4 more onto its SSD (copies, not new residents), 2 into w0's HBM
        r.onBatch(1, 0, stored(Tier.DRAM, 1, 2, 3, 4), 0);
        r.onBatch(1, 1, stored(Tier.SSD, 1, 2, 3, 4), 0);
        r.onBatch(0, 0, stored(Tier.HBM, 7, 8), 0);
        assertThat(r.route(FOUR_BLOCKS, LOAD, SECOND).chosen().coverage().prefixBlocks()).isEqualTo(4);
        // that decision obtained 4 blocks without recompute (w0 from w1's DRAM, or w1 locally): 4 reused
        // over 6 stored, × 4 tokens a block / 100 tokens/s
        Decision d = r.route(new RouteRequest(chain(50), 8), LOAD, 2 * SECOND);
        assertThat(d.outlook().reuseSecondsPerBlock()).isCloseTo(4.0 / 6 * 4 / 100, org.assertj.core.data.Offset.offset(1e-12));
    }

    @Test
    void jointChargesAPeerCopyForTheCacheItDisplaces() {
        // w0 idle reads the 4-block prefix from w1's host (0.03 s); w1 holds it behind a 0.2 s queue
        Candidate peer = new Candidate(0, "w0", true, 0, 0, 0.03, 0.01, 1, new Coverage(0, 0, 4, 0, 0));
        Candidate holder = new Candidate(1, "w1", true, 20, 0.2, 0.001, 0.01, 1, new Coverage(4, 0, 0, 0, 4));
        List<Candidate> c = List.of(peer, holder);
        // w0: 0.04 + 0.04 rise = 0.08 < w1 0.211; a stored block worth 0.02 s: + 4 × 0.02 = 0.16 still
        assertThat(JOINT.choose(c, Outlook.NONE)).isEqualTo(0);
        assertThat(JOINT.choose(c, new Outlook(0, 0, 0.02))).isEqualTo(0);
        // worth 0.05 s: + 0.2 = 0.28 > 0.211
        assertThat(JOINT.choose(c, new Outlook(0, 0, 0.05))).isEqualTo(1);
        // under a backlog (2 requests behind each worker) the displaced recompute delays them too:
        // w0 10.04 + 0.04 + 0.029 × 2 = 10.138 < w1 10.211 without it, + 4 × 0.02 × 3 = 10.378 with it
        Candidate busyPeer = new Candidate(0, "w0", true, 1_000, 10, 0.03, 0.01, 1, new Coverage(0, 0, 4, 0, 0));
        Candidate busyHolder = new Candidate(1, "w1", true, 1_020, 10.2, 0.001, 0.01, 1, new Coverage(4, 0, 0, 0, 4));
        List<Candidate> busy = List.of(busyPeer, busyHolder);
        assertThat(JOINT.choose(busy, new Outlook(10, 4, 0))).isEqualTo(0);
        assertThat(JOINT.choose(busy, new Outlook(10, 4, 0.02))).isEqualTo(1);
        // the baselines ignore it
        assertThat(LOAD.choose(busy, new Outlook(10, 4, 0.02))).isEqualTo(0);
        assertThat(OVERLAP.choose(c, new Outlook(0, 0, 0))).isEqualTo(1);
    }

    @Test
    void anOutlookRejectsNonsense() {
        assertThatThrownBy(() -> new Outlook(-1, 0)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new Outlook(1, Double.NaN)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new Outlook(1, 1, Double.POSITIVE_INFINITY)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new Outlook(1, 1, -0.1)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void jointDiffersFromLoadOnlyWhenTheLocalPrefixOutweighsASmallQueue() {
        Router r = router(2);
        r.onBatch(1, 0, stored(Tier.HBM, 1, 2, 3, 4), 0);
        r.route(new RouteRequest(chain(9), 10), LOAD, 0); // w0 0.1 s
        r.route(new RouteRequest(chain(8), 15), LOAD, 0); // w1 0.15 s
        List<Candidate> c = r.route(FOUR_BLOCKS, JOINT, 0).candidates();
        assertThat(LOAD.choose(c)).isEqualTo(0);
        assertThat(JOINT.choose(c)).isEqualTo(1);   // 0.15 + 0.01 < 0.1 + 0.16
    }

    @Test
    void completionsGiveBackTheChargeAndMeasureThePrefillRate() {
        Router r = router(1);
        Decision d = r.route(new RouteRequest(chain(1, 2), 8), JOINT, 0);
        assertThat(r.status(0, 0).outstandingTokens()).isEqualTo(8);
        r.completed(0, d.chargedTokens(), 8, 0.02, 0);                   // 400 tokens/s, the first sample replaces the default
        assertThat(r.status(0, 0).outstandingTokens()).isZero();
        assertThat(r.status(0, 0).prefillTokensPerSecond()).isEqualTo(400);
        r.completed(0, 0, 100, 1.0, 0);                                  // EWMA 0.8 * 400 + 0.2 * 100
        assertThat(r.status(0, 0).prefillTokensPerSecond()).isCloseTo(340, org.assertj.core.data.Offset.offset(1e-9));
        Decision d2 = r.route(new RouteRequest(chain(3), 34), LOAD, 0);
        assertThat(d2.chosen().recomputeSeconds()).isCloseTo(0.1, org.assertj.core.data.Offset.offset(1e-9));
    }

    @Test
    void theRunningRequestCountsOnlyWithWhatItHasLeftToCompute() {
        Router r = router(1);
        r.route(new RouteRequest(chain(1), 200), LOAD, 0);           // 2 s, starts at once
        r.route(new RouteRequest(chain(2), 100), LOAD, 0);           // queued behind it
        assertThat(r.route(new RouteRequest(chain(3), 4), LOAD, SECOND).chosen().queueSeconds())
                .isCloseTo(1.0 + 1.0, org.assertj.core.data.Offset.offset(1e-9));   // 1 s left of the first + the second
        assertThat(r.route(new RouteRequest(chain(4), 4), LOAD, 5 * SECOND).chosen().queueSeconds())
                .isCloseTo(1.0 + 0.04, org.assertj.core.data.Offset.offset(1e-9));  // the head counts 0 once overdue, never less
        r.completed(0, 200, 0, 0, 6 * SECOND);                        // the second starts at 6 s
        assertThat(r.route(new RouteRequest(chain(5), 4), LOAD, 6 * SECOND + SECOND / 2).chosen().queueSeconds())
                .isCloseTo(0.5 + 0.08, org.assertj.core.data.Offset.offset(1e-9));
    }

    @Test
    void aStaleWorkerIsScoredByLoadUntilItsNextBatch() {
        RouterSettings s = new RouterSettings(COST, 1000, 100, SECOND, 5 * SECOND, 0.2);
        Router r = router(2, s);
        r.onBatch(1, 0, stored(Tier.DRAM, 1, 2, 3, 4), 0);
        // route 40 tokens (0.4 s) of new blocks to w1: its events are due by 0.4 s + 5 s
        Decision d = r.route(new RouteRequest(chain(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14), 56), OVERLAP, 0);
        assertThat(d.worker()).isEqualTo(1);
        assertThat(r.trusted(1, 5 * SECOND)).isTrue();
        long late = 6 * SECOND;
        assertThat(r.trusted(1, late)).isFalse();
        Decision fb = r.route(FOUR_BLOCKS, OVERLAP, late);
        assertThat(fb.fallback()).isTrue();
        assertThat(fb.candidates().get(1).coverage()).isEqualTo(Coverage.NONE);
        assertThat(fb.candidates().get(0).coverage()).isEqualTo(Coverage.NONE);   // and it serves no peer either
        assertThat(fb.worker()).isEqualTo(0);                                     // no overlap anywhere: the less loaded
        r.onBatch(1, 1, stored(Tier.DRAM, 5), late);
        assertThat(r.trusted(1, late)).isTrue();
        assertThat(r.route(FOUR_BLOCKS, OVERLAP, late).worker()).isEqualTo(1);
    }

    @Test
    void aBusyWorkerIsNotStaleWhileItsQueuedWorkIsStillDue() {
        RouterSettings s = new RouterSettings(COST, 1000, 100, SECOND, SECOND, 0.2);
        Router r = router(1, s);
        r.route(new RouteRequest(chain(1, 2, 3), 1000), LOAD, 0);        // 10 s of prefill
        r.route(new RouteRequest(chain(4, 5, 6), 1000), LOAD, 0);        // due at 20 s, but the first one at 10 s
        assertThat(r.trusted(0, 10 * SECOND)).isTrue();
        assertThat(r.trusted(0, 11 * SECOND + 1)).isFalse();
    }

    @Test
    void aGapIsScoredByLoadUntilTheReplayFillsIt() {
        Router r = router(2);
        assertThat(r.onBatch(1, 0, stored(Tier.DRAM, 1), 0)).isEqualTo(BatchOutcome.APPLIED);
        assertThat(r.onBatch(1, 1, stored(Tier.DRAM, 2), 0)).isEqualTo(BatchOutcome.APPLIED);
        assertThat(r.onBatch(1, 3, stored(Tier.DRAM, 4), 0)).isEqualTo(BatchOutcome.GAP);
        assertThat(r.nextSequence(1)).isEqualTo(2);
        assertThat(r.trusted(1, 0)).isFalse();
        assertThat(r.route(FOUR_BLOCKS, OVERLAP, 0).worker()).isEqualTo(0);
        assertThat(r.onBatch(1, 4, stored(Tier.DRAM, 5), 0)).isEqualTo(BatchOutcome.IGNORED);   // live, still ahead
        // the replay from 2: batches 2, 3, 4
        assertThat(r.onBatch(1, 1, stored(Tier.DRAM, 2), 0)).isEqualTo(BatchOutcome.DUPLICATE);
        assertThat(r.onBatch(1, 2, stored(Tier.DRAM, 3), 0)).isEqualTo(BatchOutcome.APPLIED);
        assertThat(r.trusted(1, 0)).isFalse();
        assertThat(r.onBatch(1, 3, stored(Tier.DRAM, 4), 0)).isEqualTo(BatchOutcome.APPLIED);
        assertThat(r.trusted(1, 0)).isTrue();
        assertThat(r.onBatch(1, 4, stored(Tier.DRAM, 5), 0)).isEqualTo(BatchOutcome.APPLIED);
        r.onReplayEnd(1, 0);
        assertThat(r.trusted(1, 0)).isTrue();
        Decision d = r.route(FOUR_BLOCKS, OVERLAP, 0);
        assertThat(d.worker()).isEqualTo(1);
        assertThat(d.chosen().coverage().localPrefixBlocks()).isEqualTo(4);
        assertThat(r.counters().repairsCompleted()).isEqualTo(1);
    }

    @Test
    void aGapNotRepairedWithinTheBoundClearsTheWorkerAndResyncs() {
        Router r = router(2);
        r.onBatch(1, 0, stored(Tier.DRAM, 1, 2), 0);
        r.onBatch(1, 5, List.of(new IndexEvent.Removed(chain(2), Tier.DRAM)), SECOND);   // the removal we would miss
        r.onTick(SECOND + RouterSettings.DEFAULT_REPAIR_BOUND_NANOS - 1);
        assertThat(r.repairing(1)).isTrue();
        r.onTick(SECOND + RouterSettings.DEFAULT_REPAIR_BOUND_NANOS);
        assertThat(r.repairing(1)).isFalse();
        assertThat(r.trusted(1, 4 * SECOND)).isTrue();
        // everything w1 held was forgotten: block 2 (really gone) cannot attract a request
        assertThat(r.index().holds(1, Tier.DRAM, BlockKeys.of(1))).isFalse();
        assertThat(r.index().holds(1, Tier.DRAM, BlockKeys.of(2))).isFalse();
        assertThat(r.nextSequence(1)).isEqualTo(-1);
        assertThat(r.onBatch(1, 9, stored(Tier.DRAM, 7), 4 * SECOND)).isEqualTo(BatchOutcome.APPLIED);
        assertThat(r.nextSequence(1)).isEqualTo(10);
        assertThat(r.counters().repairsAbandoned()).isEqualTo(1);
    }

    @Test
    void aReplayThatCannotFillTheGapClearsTheWorker() {
        Router r = router(1);
        r.onBatch(0, 0, stored(Tier.DRAM, 1), 0);
        r.onBatch(0, 3, stored(Tier.DRAM, 2), 0);
        r.onBatch(0, 2, stored(Tier.DRAM, 3), 0);   // the publisher kept only from 2: 1 is lost
        r.onReplayEnd(0, 0);
        assertThat(r.repairing(0)).isFalse();
        assertThat(r.index().size()).isZero();
    }

    @Test
    void restartsClearTheWorkersEntries() {
        Router r = router(2);
        r.onBatch(0, 0, stored(Tier.DRAM, 9), 0);
        r.onBatch(1, 0, stored(Tier.DRAM, 1, 2), 0);
        r.onBatch(1, 1, stored(Tier.SSD, 3), 0);
        // a new publisher run starts at 0 again
        assertThat(r.onBatch(1, 0, List.of(new IndexEvent.Cleared(), new IndexEvent.Stored(chain(4), Tier.DRAM)), 0))
                .isEqualTo(BatchOutcome.RESTARTED);
        assertThat(r.index().holds(1, Tier.DRAM, BlockKeys.of(1))).isFalse();
        assertThat(r.index().holds(1, Tier.SSD, BlockKeys.of(3))).isFalse();
        assertThat(r.index().holds(1, Tier.DRAM, BlockKeys.of(4))).isTrue();
        assertThat(r.index().holds(0, Tier.DRAM, BlockKeys.of(9))).isTrue();
        // AllBlocksCleared in sequence (the Manager lost residency changes)
        r.onBatch(1, 1, List.of(new IndexEvent.Cleared()), 0);
        assertThat(r.index().holds(1, Tier.DRAM, BlockKeys.of(4))).isFalse();
        // a new instance for the worker
        r.onBatch(0, 1, stored(Tier.DRAM, 10), 0);
        r.restarted(0, 0);
        assertThat(r.index().size()).isZero();
        assertThat(r.nextSequence(0)).isEqualTo(-1);
    }

    @Test
    void withEveryWorkerUntrustedEveryPolicyChoosesByLoad() {
        RouterSettings s = new RouterSettings(COST, 1000, 100, SECOND, SECOND, 0.2);
        Router r = router(3, s);
        r.onBatch(0, 0, stored(Tier.DRAM, 1, 2, 3, 4), 0);
        r.onBatch(1, 0, stored(Tier.DRAM, 1, 2, 3, 4), 0);
        r.onBatch(2, 0, stored(Tier.DRAM, 1, 2, 3, 4), 0);
        r.onBatch(0, 2, stored(Tier.DRAM, 5), 0);                              // gap
        r.onBatch(1, 2, stored(Tier.DRAM, 5), 0);                              // gap
        r.route(new RouteRequest(chain(20, 21), 1000), LOAD, 0);                // w0 (tie): 10 s
        r.route(new RouteRequest(chain(30, 31), 1000), LOAD, 0);                // w1: 10 s
        r.route(new RouteRequest(chain(40, 41), 500), LOAD, 0);                 // w2: 5 s, due by 6 s, then stale
        long later = 7 * SECOND;
        for (int w = 0; w < 3; w++) assertThat(r.trusted(w, later)).isFalse();
        Decision d = r.route(FOUR_BLOCKS, JOINT, later);
        assertThat(d.fallback()).isTrue();
        for (Candidate c : d.candidates()) assertThat(c.coverage()).isEqualTo(Coverage.NONE);
        for (Policy p : List.of(JOINT, LOAD, OVERLAP)) assertThat(p.choose(d.candidates())).as(p.name()).isEqualTo(2);
    }

    @Test
    void boundsAreEnforced() {
        assertThatThrownBy(() -> router(65)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new Router(RouterSettings.defaults(COST), List.of("a", "a")))
                .hasMessageContaining("duplicate");
        Router r = router(1, new RouterSettings(COST, 3, 2, SECOND, SECOND, 0.2));
        assertThatThrownBy(() -> r.route(new RouteRequest(chain(1, 2, 3), 12), JOINT, 0))
                .hasMessageContaining("at most 2 blocks");
        r.onBatch(0, 0, stored(Tier.DRAM, 1, 2, 3, 4, 5), 0);
        assertThat(r.counters().indexBlocks()).isEqualTo(3);
        assertThat(r.counters().indexEvicted()).isEqualTo(2);
        assertThatThrownBy(() -> new RouteRequest(chain(1), 0)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> r.onBatch(0, -1, List.of(), 0)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> Policy.named("fastest")).hasMessageContaining("unknown policy");
    }
}
