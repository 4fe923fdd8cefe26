package io.orbitkv.router;

import java.util.List;

/**
 * The KV-aware policy: the worker with the least estimated time to first token, queue wait +
 * transfer of the prefix it does not hold locally + recompute of what nobody holds
 * ({@link Candidate#ttftSeconds()}), plus what the choice adds to the <em>shortest</em> queue.
 * It takes a cached prefix only when the prefix saves more than the longer queue costs, and sends
 * a request to an idle worker that reads the prefix from a peer when that is faster than waiting
 * for the worker that holds it.
 *
 * <pre>
 *   score(w) = TTFT(w) + (min queue after the request is placed on w − min queue now)
 * </pre>
 * The second term is 0 for every worker but the one with the shortest queue, and there it is the
 * rise of that queue: min(its queue + the request's work, the second shortest queue) − its queue.
 *
 * <p>Design note: the next request to arrive waits at least the shortest queue, and the requests
 * at the p99 of the shipped trace are cold 75,000–125,000-token prompts that every policy places
 * by queue alone (nothing holds their prefix), so their wait <em>is</em> the shortest queue at
 * their arrival. Greedy TTFT ignores that: it would put 0.16 s of recompute on the idle worker to
 * save 0.05 s against a cache hit behind a slightly longer queue, and the next large prompt pays
 * the 0.16 s. The term prices the choice's cost to one future arrival, with no constant to tune.
 * Chosen looking at the first half of the shipped trace only (docs/performance.md, "Routing
 * policies"): against the pure TTFT score, p99 fell in 4 of the 5 first-half cells compared (4 and
 * 8 workers, and perturbed cache sizes and loads) and p50 fell or held in those 4; in the fifth
 * (4 workers, 4,000 blocks) both rose by about 1 %. The M/M/1-style alternative (work ×
 * requests outstanding on the same worker) moved p50/p99 by at most 2.2 % and was worse at 8
 * workers (docs/routing.md).
 */
public record JointPolicy() implements Policy {

    @Override
    public String name() {
        return "joint";
    }

    @Override
    public int choose(List<Candidate> candidates) {
        int shortest = 0;
        double min = Double.POSITIVE_INFINITY;
        double second = Double.POSITIVE_INFINITY;
        for (int i = 0; i < candidates.size(); i++) {
            double q = candidates.get(i).queueSeconds();
            if (q < min) {
                second = min;
                min = q;
                shortest = i;
            } else if (q < second) {
                second = q;
            }
        }
        int best = -1;
        double bestScore = Double.POSITIVE_INFINITY;
        for (int i = 0; i < candidates.size(); i++) {
            Candidate c = candidates.get(i);
            double rise = i == shortest ? Math.min(second, c.queueSeconds() + c.workSeconds()) - min : 0;
            double s = c.ttftSeconds() + rise;
            if (best < 0 || s < bestScore || (s == bestScore && Policy.lessLoaded(c, candidates.get(best)))) {
                best = i;
                bestScore = s;
            }
        }
        return best;
    }
}
