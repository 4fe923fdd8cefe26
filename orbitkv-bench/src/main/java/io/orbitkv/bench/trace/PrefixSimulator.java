package io.orbitkv.bench.trace;

import java.util.List;

/**
 * Runs a {@link CachePolicy} over a trace and counts prefix hits exactly as the replay counts
 * them against a Manager: a request's hit is the longest prefix of its chain whose blocks are
 * all cached when it arrives, in tokens ({@link TraceRequest#hitTokens}); the ratio is hit
 * tokens over prompt tokens of all requests.
 */
public final class PrefixSimulator {

    /**
     * What one policy served.
     *
     * @param hitBlocks per request, in trace order, the blocks of its hit prefix
     */
    public record Result(String policy, int capacityBlocks, long requests, long promptTokens, long hitTokens,
                         long references, long hitBlockReferences, int[] hitBlocks) {
        public Result {
            hitBlocks = hitBlocks.clone();
        }

        /** Hit tokens over prompt tokens. */
        public double hitRatio() {
            return promptTokens == 0 ? 0 : (double) hitTokens / promptTokens;
        }

        /** Blocks of request {@code i}'s hit prefix. */
        public int hitBlocksOf(int i) {
            return hitBlocks[i];
        }
    }

    private PrefixSimulator() {}

    public static Result run(List<TraceRequest> trace, CachePolicy policy, int blockTokens) {
        if (blockTokens < 1) throw new IllegalArgumentException("blockTokens must be >= 1: " + blockTokens);
        long prompt = 0;
        long hit = 0;
        long references = 0;
        long hitReferences = 0;
        int[] perRequest = new int[trace.size()];
        for (int q = 0; q < trace.size(); q++) {
            TraceRequest r = trace.get(q);
            int k = policy.hitBlocks(r);
            perRequest[q] = k;
            prompt += r.inputLength();
            hit += r.hitTokens(k, blockTokens);
            references += r.blocks();
            hitReferences += k;
            policy.access(r);
            if (policy.size() > policy.capacityBlocks()) {
                throw new IllegalStateException(policy.name() + " holds " + policy.size() + " blocks, over its capacity "
                        + policy.capacityBlocks());
            }
        }
        return new Result(policy.name(), policy.capacityBlocks(), trace.size(), prompt, hit, references, hitReferences,
                perRequest);
    }

    /** Distinct block ids of the trace. */
    public static int uniqueBlocks(List<TraceRequest> trace) {
        java.util.HashSet<Long> ids = new java.util.HashSet<>();
        for (TraceRequest r : trace) {
            for (int i = 0; i < r.blocks(); i++) ids.add(r.block(i));
        }
        return ids.size();
    }
}
