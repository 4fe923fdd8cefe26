package io.orbitkv.router;

import java.util.List;

/** Baseline: the worker with the least outstanding prefill work (seconds of queue), blind to caches. */
public record LoadOnlyPolicy() implements Policy {

    @Override
    public String name() {
        return "load";
    }

    @Override
    public int choose(List<Candidate> candidates) {
        int best = 0;
        for (int i = 1; i < candidates.size(); i++) {
            if (Policy.lessLoaded(candidates.get(i), candidates.get(best))) best = i;
        }
        return best;
    }
}
