package io.orbitkv.bench.trace;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Which requests the Manager loses against Belady, and why: for each request whose Belady hit is
 * longer than the Manager's, the tokens between the two, bucketed by the reuse distance of the
 * first block the Manager missed: how many distinct new blocks the trace brought in since that
 * block was last referenced. A block within the capacity's distance is one an LRU of that
 * capacity would still hold (lost to the policy's order: a better online policy wins it); a block
 * farther than the capacity survives only in a cache that declined to admit the blocks in
 * between, which takes knowing they would not be reused (only an admission predicate can win
 * it). The report ends with what the trace offers such a predicate: the share of first
 * references never referenced again.
 */
final class LossAnalysis {

    private static final double[] BUCKETS = {1, 2, 4};

    private LossAnalysis() {}

    static String report(List<TraceRequest> trace, List<TraceBench.Row> rows, int blockTokens) {
        long[][] distance = reuseDistances(trace);
        StringBuilder b = new StringBuilder("## Where OrbitKV loses against Belady\n\n");
        b.append("Tokens Belady serves and the Manager does not, by the reuse distance d of the first block the Manager "
                + "missed (distinct new blocks since its last reference), against the capacity C in blocks. d ≤ C: an LRU "
                + "of C blocks still holds it (the policy's order lost it); d > C: only a cache that skipped admitting "
                + "blocks that are never reused keeps it.\n\n");
        b.append("| run | requests losing | tokens lost | d ≤ C | C < d ≤ 2C | 2C < d ≤ 4C | d > 4C | requests winning | tokens won |\n");
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
                while (bucket < BUCKETS.length && d > BUCKETS[bucket] * capacity) bucket++;
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
     * Per request {@code q} and block position {@code i}, the distinct new blocks the trace brought
     * in between block {@code i}'s previous reference and request {@code q} (Long.MAX_VALUE for a
     * first reference).
     */
    static long[][] reuseDistances(List<TraceRequest> trace) {
        long[][] out = new long[trace.size()][];
        Map<Long, Long> lastSeenAt = new HashMap<>();
        long inserted = 0;
        for (int q = 0; q < trace.size(); q++) {
            TraceRequest r = trace.get(q);
            out[q] = new long[r.blocks() + 1];
            for (int i = 0; i < r.blocks(); i++) {
                Long at = lastSeenAt.get(r.block(i));
                out[q][i] = at == null ? Long.MAX_VALUE : inserted - at;
            }
            out[q][r.blocks()] = 0;
            for (int i = 0; i < r.blocks(); i++) {
                if (!lastSeenAt.containsKey(r.block(i))) inserted++;
                lastSeenAt.put(r.block(i), inserted);
            }
        }
        return out;
    }
}
