package io.orbitkv.router;

import java.util.List;

/**
 * The KV-aware policy: the worker with the least estimated time to first token, queue wait +
 * transfer of the prefix it does not hold locally + recompute of what nobody holds
 * ({@link Candidate#ttftSeconds()}). It takes a cached prefix only when the prefix saves more
 * than the longer queue costs, and sends a request to an idle worker that reads the prefix from a
 * peer when that is faster than waiting for the worker that holds it.
 */
public record JointPolicy() implements Policy {

    @Override
    public String name() {
        return "joint";
    }

    @Override
    public int choose(List<Candidate> candidates) {
        int best = 0;
        for (int i = 1; i < candidates.size(); i++) {
            Candidate c = candidates.get(i);
            Candidate b = candidates.get(best);
            if (c.ttftSeconds() < b.ttftSeconds() || (c.ttftSeconds() == b.ttftSeconds() && Policy.lessLoaded(c, b))) best = i;
        }
        return best;
    }
}
