package io.orbitkv.bench.trace;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The simulators against answers computed by hand (in the comments), with 10-token blocks so the
 * token arithmetic is readable.
 */
class CachePolicyTest {

    private static final int T = 10;

    private static TraceRequest req(long line, long inputLength, long... ids) {
        return new TraceRequest(line, line * 1000, inputLength, 1, ids);
    }

    /**
     * r0 [1,2,3] 30 tokens; r1 [1,2,4] 25 (partial last block); r2 [1,2,3]; r3 [5] 10; r4 [1,2,3].
     * 125 prompt tokens.
     */
    private static List<TraceRequest> handTrace() {
        return List.of(req(1, 30, 1, 2, 3), req(2, 25, 1, 2, 4), req(3, 30, 1, 2, 3), req(4, 10, 5),
                req(5, 30, 1, 2, 3));
    }

    @Test
    void lruOfThreeBlocks() {
        // r0 miss, inserts 1 2 3. r1 hits 1 2 (20), inserts 4 evicting 3. r2 hits 1 2 (20), 3 evicts 4.
        // r3 miss, 5 evicts 1. r4: block 1 is gone, so nothing counts (2 and 3 are behind it): 0.
        PrefixSimulator.Result r = PrefixSimulator.run(handTrace(), new LruPolicy(3), T);
        assertThat(r.promptTokens()).isEqualTo(125);
        assertThat(r.hitTokens()).isEqualTo(40);
        assertThat(r.hitBlocks()).containsExactly(0, 2, 2, 0, 0);
        assertThat(r.references()).isEqualTo(13);
        assertThat(r.hitBlockReferences()).isEqualTo(4);
    }

    @Test
    void beladyOfThreeBlocks() {
        // Next uses: 4 (in r1) and 5 (in r3) are never referenced again, so Belady bypasses them and
        // keeps 1 2 3: r1 hits 1 2 (20), r2 hits all 3 (30), r4 all 3 (30): 80, the unbounded answer.
        PrefixSimulator.Result r = PrefixSimulator.run(handTrace(), new BeladyPolicy(3, handTrace()), T);
        assertThat(r.hitTokens()).isEqualTo(80);
        assertThat(r.hitBlocks()).containsExactly(0, 2, 3, 0, 3);
        PrefixSimulator.Result unbounded = PrefixSimulator.run(handTrace(), new LruPolicy(100), T);
        assertThat(unbounded.hitTokens()).isEqualTo(80);
    }

    @Test
    void beladyOfTwoBlocksEvictsTheFarthestNextUse() {
        // Capacity 2. r0: 1 (next r1), 2 (next r1) in; 3 (next r2) is farther than both: bypassed.
        // r1 hits 1 2 (20); 4 bypassed. r2: 1 2 hit (20); 3 (next r4) vs cached 1 (r4), 2 (r4):
        // 3's next use is the farthest, bypassed. r3: 5 bypassed. r4: 1 2 hit (20). Total 60.
        PrefixSimulator.Result r = PrefixSimulator.run(handTrace(), new BeladyPolicy(2, handTrace()), T);
        assertThat(r.hitBlocks()).containsExactly(0, 2, 2, 0, 2);
        assertThat(r.hitTokens()).isEqualTo(60);
    }

    @Test
    void aBlockBehindAMissingOneDoesNotCount() {
        List<TraceRequest> t = List.of(req(1, 30, 1, 2, 3), req(2, 30, 1, 9, 3));
        for (CachePolicy p : List.of(new LruPolicy(10), new BeladyPolicy(10, t), new CaffeinePolicy(10))) {
            PrefixSimulator.Result r = PrefixSimulator.run(t, p, T);
            assertThat(r.hitBlocks()).as(p.name()).containsExactly(0, 1);
            assertThat(r.hitTokens()).as(p.name()).isEqualTo(10);
        }
    }

    @Test
    void aPartialLastBlockCountsItsRealTokens() {
        List<TraceRequest> t = List.of(req(1, 15, 1, 2), req(2, 15, 1, 2));
        PrefixSimulator.Result r = PrefixSimulator.run(t, new LruPolicy(2), T);
        assertThat(r.hitBlocks()).containsExactly(0, 2);
        assertThat(r.hitTokens()).isEqualTo(15);
        assertThat(r.hitRatio()).isEqualTo(0.5);
    }

    @Test
    void oracleAdmissionSkipsBlocksThatAreNeverReusedOnly() {
        // Capacity 3 as in lruOfThreeBlocks, but 4 and 5 are not admitted: 1 2 3 stay, as with Belady.
        PrefixSimulator.Result r = PrefixSimulator.run(handTrace(), LruPolicy.withOracleAdmission(3, handTrace()), T);
        assertThat(r.hitBlocks()).containsExactly(0, 2, 3, 0, 3);
        assertThat(r.hitTokens()).isEqualTo(80);
    }

    @Test
    void beladyRefusesAnotherSequence() {
        BeladyPolicy b = new BeladyPolicy(3, handTrace());
        assertThatThrownBy(() -> b.access(req(9, 10, 7))).hasMessageContaining("built for another sequence");
        assertThatThrownBy(() -> new LruPolicy(0)).hasMessageContaining(">= 1 block");
    }

    /** With room for every block, every policy serves exactly the unbounded answer; with less, never more than it. */
    @Property(tries = 60)
    void withRoomForEveryBlockAllPoliciesAgree(@ForAll @IntRange(min = 1, max = 60) int requests,
                                               @ForAll long seed) {
        List<TraceRequest> t = randomTrace(requests, new Random(seed));
        int unique = PrefixSimulator.uniqueBlocks(t);
        long unbounded = PrefixSimulator.run(t, new LruPolicy(unique), T).hitTokens();
        assertThat(PrefixSimulator.run(t, new BeladyPolicy(unique, t), T).hitTokens()).isEqualTo(unbounded);
        assertThat(PrefixSimulator.run(t, new CaffeinePolicy(unique), T).hitTokens()).isEqualTo(unbounded);
        int small = Math.max(1, unique / 4);
        for (CachePolicy p : List.of(new LruPolicy(small), new BeladyPolicy(small, t), new CaffeinePolicy(small))) {
            assertThat(PrefixSimulator.run(t, p, T).hitTokens()).as(p.name()).isLessThanOrEqualTo(unbounded);
        }
    }

    /** Conversations: each request extends an earlier one's chain by a few new blocks, or starts a new one. */
    static List<TraceRequest> randomTrace(int requests, Random random) {
        List<long[]> chains = new ArrayList<>();
        List<TraceRequest> out = new ArrayList<>();
        long nextId = 1;
        for (int q = 0; q < requests; q++) {
            long[] base = chains.isEmpty() || random.nextInt(3) == 0 ? new long[0]
                    : chains.get(random.nextInt(chains.size()));
            int fresh = 1 + random.nextInt(4);
            long[] ids = java.util.Arrays.copyOf(base, base.length + fresh);
            for (int i = base.length; i < ids.length; i++) ids[i] = nextId++;
            chains.add(ids);
            out.add(new TraceRequest(q + 1, q * 100L, (ids.length - 1) * (long) T + 1 + random.nextInt(T), 1, ids));
        }
        return out;
    }
}
