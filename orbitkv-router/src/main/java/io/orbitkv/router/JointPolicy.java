package io.orbitkv.router;

import java.util.List;

/**
 * The KV-aware policy: the worker with the least estimated time to first token, queue wait +
 * transfer of the prefix it does not hold locally + recompute of what nobody holds
 * ({@link Candidate#ttftSeconds()}), plus what the choice adds to the <em>shortest</em> queue,
 * plus, when every worker has a queue, the work the choice adds beyond the least-work worker's
 * times the requests expected to wait behind it. It takes a cached prefix only when the prefix
 * saves more than the longer queue costs, and sends a request to an idle worker that reads the
 * prefix from a peer when that is faster than waiting for the worker that holds it.
 *
 * <pre>
 *   score(w) = TTFT(w) + rise(w) + (work(w) − min_v work(v)) × λ·q_min / N
 *   rise(w)  = min queue after the request is placed on w − min queue now
 * </pre>
 * {@code rise} is 0 for every worker but the one with the shortest queue, and there it is the rise of
 * that queue: min(its queue + the request's work, the second shortest queue) − its queue.
 * {@code work} is transfer + recompute (engine seconds), {@code q_min} the shortest queue,
 * {@code λ·q_min} the requests the router saw arrive in the last {@code q_min} seconds
 * ({@link Backlog#expectedArrivals()}), {@code N} the number of workers.
 *
 * <p>Design note, the rise: the next request to arrive waits at least the shortest queue, and the
 * requests at the p99 of the shipped trace are cold 75,000–125,000-token prompts that every policy
 * places by queue alone (nothing holds their prefix), so their wait <em>is</em> the shortest queue at
 * their arrival. Greedy TTFT ignores that: it would put 0.16 s of recompute on the idle worker to
 * save 0.05 s against a cache hit behind a slightly longer queue, and the next large prompt pays the
 * 0.16 s. The term prices the choice's cost to one future arrival, with no constant to tune.
 *
 * <p>Design note, the backlog term (derivation): when every queue is non-empty the engines are
 * work-conserving and busy, so a second of work added anywhere finishes every later request a second
 * later, until the backlog drains. The backlog drains no sooner than the shortest queue, {@code q_min};
 * the requests arriving in that time, {@code λ·q_min} for the whole cluster, are spread over {@code N}
 * workers (by this policy, whose queue terms balance them), so about {@code λ·q_min/N} of them land
 * behind the added work on its worker (or, rebalanced, all {@code λ·q_min} share it in {@code N}
 * parts: the same total). Choosing {@code w} over the least-work worker costs them
 * {@code (work(w) − min work) · λ·q_min/N} seconds in total, which the score adds to this request's
 * own TTFT, so the sum approximates the delay the choice causes to everyone (own + later requests).
 * With a worker idle {@code q_min = 0} and the term vanishes: the score is the previous one.
 * {@code λ} is measured over the horizon it is applied to (the last {@code q_min} seconds), so
 * there is no window or weight to choose. This is why overlap-only won p99 on the bursty second
 * trace: under overload the work a placement adds (a recompute, a copy from a peer) is paid by the
 * whole backlog, not by the one request. Chosen on the first half of the shipped trace (and the
 * first half of variants of it) only; docs/performance.md, "Routing policies".
 */
public record JointPolicy() implements Policy {

    @Override
    public String name() {
        return "joint";
    }

    @Override
    public int choose(List<Candidate> candidates) {
        return choose(candidates, Backlog.NONE);
    }

    @Override
    public int choose(List<Candidate> candidates, Backlog backlog) {
        int shortest = 0;
        double min = Double.POSITIVE_INFINITY;
        double second = Double.POSITIVE_INFINITY;
        double minWork = Double.POSITIVE_INFINITY;
        for (int i = 0; i < candidates.size(); i++) {
            Candidate c = candidates.get(i);
            double q = c.queueSeconds();
            if (q < min) {
                second = min;
                min = q;
                shortest = i;
            } else if (q < second) {
                second = q;
            }
            minWork = Math.min(minWork, c.workSeconds());
        }
        // requests expected to wait behind the added work on its worker; 0 when a worker is idle
        double behind = min > 0 ? backlog.expectedArrivals() / candidates.size() : 0;
        int best = -1;
        double bestScore = Double.POSITIVE_INFINITY;
        for (int i = 0; i < candidates.size(); i++) {
            Candidate c = candidates.get(i);
            double rise = i == shortest ? Math.min(second, c.queueSeconds() + c.workSeconds()) - min : 0;
            double s = c.ttftSeconds() + rise + (c.workSeconds() - minWork) * behind;
            if (best < 0 || s < bestScore || (s == bestScore && Policy.lessLoaded(c, candidates.get(best)))) {
                best = i;
                bestScore = s;
            }
        }
        return best;
    }
}
