package io.orbitkv.router;

import java.util.List;

/**
 * Baseline: the worker whose host holds the longest prefix of the request locally (any tier),
 * as the common prefix-cache scorers do; ties (no overlap anywhere included) go to the least
 * loaded. Blind to queues otherwise and to what peers could supply.
 */
public record OverlapOnlyPolicy() implements Policy {

    @Override
    public String name() {
        return "overlap";
    }

    @Override
    public int choose(List<Candidate> candidates) {
        int best = 0;
        for (int i = 1; i < candidates.size(); i++) {
            Candidate c = candidates.get(i);
            Candidate b = candidates.get(best);
            int cp = c.coverage().localPrefixBlocks();
            int bp = b.coverage().localPrefixBlocks();
            if (cp > bp || (cp == bp && Policy.lessLoaded(c, b))) best = i;
        }
        return best;
    }
}
