package io.orbitkv.router;

import java.util.List;

/**
 * The KV-aware policy: the worker with the least estimated time to first token, queue wait +
 * transfer of the prefix it does not hold locally + recompute of what nobody holds
 * ({@link Candidate#ttftSeconds()}), plus what the choice adds to the <em>shortest</em> queue,
 * plus, when every worker has a queue, the work the choice adds beyond the least-work worker's
 * times the requests expected to wait behind it, plus the cache a copy from a peer displaces. It
 * takes a cached prefix only when the prefix saves more than the longer queue costs, and sends a
 * request to an idle worker that reads the prefix from a peer when that is faster than waiting for
 * the worker that holds it and worth the blocks the copy evicts there.
 *
 * <pre>
 *   score(w) = TTFT(w) + rise(w) + (work(w) − min_v work(v)) × B + peerBlocks(w) × r × (1 + B)
 *   rise(w)  = min queue after the request is placed on w − min queue now
 *   B        = λ·H / N    (0 while a worker is idle)
 * </pre>
 * {@code rise} is 0 for every worker but the one with the shortest queue, and there it is the rise of
 * that queue: min(its queue + the request's work, the second shortest queue) − its queue.
 * {@code work} is transfer + recompute (engine seconds), {@code H} the backlog's horizon (the
 * shortest queue over 1 − the measured utilization, {@link Outlook#horizonSeconds()}), {@code λ·H}
 * the requests expected in it ({@link Outlook#expectedArrivals()}), {@code N} the number of workers,
 * {@code r} the recompute seconds a block stored in memory has saved so far on average
 * ({@link Outlook#reuseSecondsPerBlock()}).
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
 * later, until the backlog drains, when some worker first runs idle. The shortest queue drains at
 * 1 − ρ of the engines' speed while arrivals go on (ρ: work routed over the workers' time, both
 * since the start), so the backlog lasts {@code H = q_min / (1 − ρ)}; the requests arriving in it,
 * {@code λ·H} for the whole cluster, are spread over {@code N} workers, so about {@code λ·H/N} land
 * behind the added work on its worker (or, rebalanced, all share it in {@code N} parts: the same
 * total). Choosing {@code w} over the least-work worker costs them {@code (work(w) − min work) · B}
 * seconds in total, which the score adds to this request's own TTFT, so the sum approximates the
 * delay the choice causes to everyone. {@code λ} is measured over the horizon it is applied to, so
 * there is no window or weight to choose.
 *
 * <p>Design note, the displaced cache: a worker that reads a prefix from a peer stores those blocks
 * again in its own host's memory, and when that memory is full each evicts a block; the prefix
 * now lives twice, and the cluster caches less. A stored block has saved {@code r} recompute seconds
 * on average (reuses over stores, measured since the start), so the copy costs later requests
 * {@code peerBlocks · r} of recompute, and, under a backlog, the {@code B} requests behind each of
 * them as much again. Without it joint moved a conversation off its holder whenever the holder's
 * queue was longer than a cheap peer copy, and in the bursty traces overlap-only's higher hit ratio
 * beat it; with unbounded host caches (nothing displaced) joint won every cell without the term.
 * All three terms were chosen on the first half of the shipped trace and two variants of that half
 * only; docs/performance.md, "Routing policies".
 */
public record JointPolicy() implements Policy {

    @Override
    public String name() {
        return "joint";
    }

    @Override
    public int choose(List<Candidate> candidates) {
        return choose(candidates, Outlook.NONE);
    }

    @Override
    public int choose(List<Candidate> candidates, Outlook outlook) {
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
        double behind = min > 0 ? outlook.expectedArrivals() / candidates.size() : 0;
        int best = -1;
        double bestScore = Double.POSITIVE_INFINITY;
        for (int i = 0; i < candidates.size(); i++) {
            Candidate c = candidates.get(i);
            double rise = i == shortest ? Math.min(second, c.queueSeconds() + c.workSeconds()) - min : 0;
            // the blocks it copies from a peer displace as many in its host's cache, each worth what a
            // stored block has saved on average, a recompute later requests pay (and those behind them)
            double displaced = c.coverage().peerBlocks() * outlook.reuseSecondsPerBlock() * (1 + behind);
            double s = c.ttftSeconds() + rise + (c.workSeconds() - minWork) * behind + displaced;
            if (best < 0 || s < bestScore || (s == bestScore && Policy.lessLoaded(c, candidates.get(best)))) {
                best = i;
                bestScore = s;
            }
        }
        return best;
    }
}
