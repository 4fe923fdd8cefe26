package io.orbitkv.bench.trace;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Which requests the Manager loses against Belady, and why: for each request whose Belady hit is
 * longer than the Manager's, the tokens between the two, bucketed by the LRU stack distance of
 * the first block the Manager missed when the request arrived: how many distinct blocks were
 * referenced since that block's last reference. A block at distance {@code d < C} is one an LRU
 * of {@code C} blocks still holds (the policy lost it: a recency policy wins it back); a block at
 * {@code d >= C} survives only in a cache that declined to admit {@code d - C + 1} of the blocks
 * in between, which takes knowing they will not be reused (only an admission predicate can win
 * it). The report ends with what the trace offers such a predicate: the share of blocks
 * referenced once only.
 *
 * <p>Design note: stack distances come from one pass with a Fenwick tree over reference
 * positions marking each block's latest reference (O(R log R) for R references; 288,500 take
 * well under a second), not from re-simulating an LRU per capacity.
 */
final class LossAnalysis {

    private static final double[] BUCKETS = {1, 2, 4};

    private LossAnalysis() {}

    static String report(List<TraceRequest> trace, List<TraceBench.Row> rows, int blockTokens) {
        long[][] distance = reuseDistances(trace);
        StringBuilder b = new StringBuilder("## Where OrbitKV loses against Belady\n\n");
        b.append("Tokens Belady serves and the Manager does not, by the LRU stack distance d of the first block the "
                + "Manager missed (distinct blocks referenced since that block's last reference, when the request "
                + "arrived), against the capacity C in blocks. d < C: an LRU of C blocks still holds it (lost to the "
                + "policy); d ≥ C: no recency policy holds it, only one that skipped admitting blocks never reused.\n\n");
        b.append("| run | requests losing | tokens lost | d < C | C ≤ d < 2C | 2C ≤ d < 4C | d ≥ 4C | requests winning | tokens won |\n");
        b.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
        for (TraceBench.Row row : rows) {
            TraceReplay.Result x = row.replay();
            long capacity = row.spec().totalBlocks();
            long losing = 0;
            long lost = 0;
            long winning = 0;
            long won = 0;
            long[] byBucket = new long[BUCKETS.length + 1];
            for (int q = 0; q < trace.size(); q++) {
                TraceRequest r = trace.get(q);
                int mine = x.hitBlocksOf(q);
                int best = row.belady().hitBlocksOf(q);
                long diff = r.hitTokens(best, blockTokens) - r.hitTokens(mine, blockTokens);
                if (diff < 0) {
                    winning++;
                    won -= diff;
                }
                if (diff <= 0) continue;
                losing++;
                lost += diff;
                long d = distance[q][mine];
                int bucket = 0;
                while (bucket < BUCKETS.length && d >= BUCKETS[bucket] * capacity) bucket++;
                byBucket[bucket] += diff;
            }
            b.append("| ").append(row.spec().label()).append(" | ").append(losing).append(" | ").append(lost);
            for (long t : byBucket) b.append(" | ").append(TraceBench.fmt(lost == 0 ? 0 : 100.0 * t / lost, 1)).append(" %");
            b.append(" | ").append(winning).append(" | ").append(won).append(" |\n");
        }
        long first = 0;
        long neverAgain = 0;
        Map<Long, Integer> refs = new HashMap<>();
        for (TraceRequest r : trace) {
            for (int i = 0; i < r.blocks(); i++) refs.merge(r.block(i), 1, Integer::sum);
        }
        for (int n : refs.values()) {
            first++;
            if (n == 1) neverAgain++;
        }
        b.append("\nOf the trace's ").append(first).append(" distinct blocks, ").append(neverAgain).append(" (")
                .append(TraceBench.fmt(100.0 * neverAgain / Math.max(1, first), 1))
                .append(" %) are referenced once only: every one of them an online policy admits takes a slot Belady "
                        + "gives to a block that will be reused. Column \"LRU + oracle admission\" of the table is LRU "
                        + "that skips exactly those admissions.\n\n");
        return b.toString();
    }

    /**
     * Per request {@code q} and block position {@code i}, the LRU stack distance of block {@code i}
     * when request {@code q} arrives: distinct blocks referenced after its last reference and before
     * {@code q} ({@link Long#MAX_VALUE} for a first reference). Index {@code blocks} of each row is 0,
     * for a request the Manager hit whole (it loses nothing there).
     */
    static long[][] reuseDistances(List<TraceRequest> trace) {
        int references = trace.stream().mapToInt(TraceRequest::blocks).sum();
        long[] fenwick = new long[references + 1];
        Map<Long, Integer> last = new HashMap<>();
        long[][] out = new long[trace.size()][];
        int position = 0;
        for (int q = 0; q < trace.size(); q++) {
            TraceRequest r = trace.get(q);
            out[q] = new long[r.blocks() + 1];
            long before = prefixSum(fenwick, position);
            for (int i = 0; i < r.blocks(); i++) {
                Integer prev = last.get(r.block(i));
                out[q][i] = prev == null ? Long.MAX_VALUE : before - prefixSum(fenwick, prev + 1);
            }
            for (int i = 0; i < r.blocks(); i++, position++) {
                Integer prev = last.put(r.block(i), position);
                if (prev != null) add(fenwick, prev, -1);
                add(fenwick, position, 1);
            }
        }
        return out;
    }

    /** Sum of the marks at positions {@code [0, end)}. */
    private static long prefixSum(long[] fenwick, int end) {
        long sum = 0;
        for (int i = end; i > 0; i -= i & -i) sum += fenwick[i];
        return sum;
    }

    private static void add(long[] fenwick, int position, long delta) {
        for (int i = position + 1; i < fenwick.length; i += i & -i) fenwick[i] += delta;
    }
}
