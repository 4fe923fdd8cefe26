package io.orbitkv.bench.trace;

import org.junit.jupiter.api.Test;

import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

class LossAnalysisTest {

    private static final long FIRST = Long.MAX_VALUE;

    @Test
    void stackDistancesOfAHandTrace() {
        // r0 [1,2,3]; r1 [1,2,4]; r2 [1,2,3]; r3 [5]; r4 [1,2,3]. At r2, block 3 was last referenced
        // in r0 and 1, 2, 4 have been referenced since: distance 3, so an LRU of 3 no longer holds it.
        List<TraceRequest> t = List.of(new TraceRequest(1, 0, 30, 1, new long[] {1, 2, 3}),
                new TraceRequest(2, 0, 30, 1, new long[] {1, 2, 4}), new TraceRequest(3, 0, 30, 1, new long[] {1, 2, 3}),
                new TraceRequest(4, 0, 10, 1, new long[] {5}), new TraceRequest(5, 0, 30, 1, new long[] {1, 2, 3}));
        long[][] d = LossAnalysis.reuseDistances(t);
        assertThat(d[0]).containsExactly(FIRST, FIRST, FIRST, 0);
        assertThat(d[1]).containsExactly(2, 1, FIRST, 0);
        assertThat(d[2]).containsExactly(2, 1, 3, 0);
        assertThat(d[3]).containsExactly(FIRST, 0);
        assertThat(d[4]).containsExactly(3, 2, 1, 0);
        // Consistent with the LRU simulator: of capacity 3 it misses exactly where d >= 3 breaks the prefix.
        PrefixSimulator.Result lru = PrefixSimulator.run(t, new LruPolicy(3), 10);
        assertThat(lru.hitBlocks()).containsExactly(0, 2, 2, 0, 0);
    }
}
