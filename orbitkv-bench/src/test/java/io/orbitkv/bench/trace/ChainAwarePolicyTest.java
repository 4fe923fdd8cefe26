package io.orbitkv.bench.trace;

import org.junit.jupiter.api.Test;

import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/** {@link ChainAwarePolicy}: leaf-first eviction and the last block's admission, by hand and on the committed slice. */
class ChainAwarePolicyTest {

    private static final int T = 10;

    private static TraceRequest req(long line, long... ids) {
        return new TraceRequest(line, line * 1000, ids.length * T, 1, ids);
    }

    @Test
    void keepsAPrefixHeadOverItsTail() {
        // Capacity 3. r0 [1,2,3,4]: 1 2 3 cached, 4 (a last block, first seen) is not. r1 [5,6]: 5 needs
        // room and the only leaf is 3, the tail, so 1 2 stay. r2 [1,2,3,4] hits 1 2. LRU instead
        // evicts the head 1 first: r2 hits nothing.
        List<TraceRequest> trace = List.of(req(1, 1, 2, 3, 4), req(2, 5, 6), req(3, 1, 2, 3, 4));
        ChainAwarePolicy chain = new ChainAwarePolicy(3);
        PrefixSimulator.Result r = PrefixSimulator.run(trace, chain, T);
        assertThat(r.hitBlocks()).containsExactly(0, 0, 2);
        assertThat(PrefixSimulator.run(trace, new LruPolicy(3), T).hitBlocks()).containsExactly(0, 0, 0);
    }

    @Test
    void admitsALastBlockOnItsSecondSighting() {
        List<TraceRequest> trace = List.of(req(1, 1, 2), req(2, 1, 2), req(3, 1, 2));
        PrefixSimulator.Result r = PrefixSimulator.run(trace, new ChainAwarePolicy(10), T);
        assertThat(r.hitBlocks()).containsExactly(0, 1, 2);
    }

    @Test
    void neverHoldsMoreThanItsCapacityAndServesAtLeastLruOnTheSlice() throws Exception {
        List<TraceRequest> trace = TraceReader.read(TraceReplayTest.slice(), 0, Integer.MAX_VALUE);
        int unique = PrefixSimulator.uniqueBlocks(trace);
        for (int pct : new int[] {5, 10, 25, 50}) {
            int cap = Math.max(1, unique * pct / 100);
            PrefixSimulator.Result chain = PrefixSimulator.run(trace, new ChainAwarePolicy(cap), 512);
            PrefixSimulator.Result lru = PrefixSimulator.run(trace, new LruPolicy(cap), 512);
            assertThat(chain.hitTokens()).as("%d %% of %d blocks", pct, unique).isGreaterThanOrEqualTo(lru.hitTokens());
        }
    }
}
