package io.orbitkv.router;

/**
 * One worker as every {@link Policy} sees it for one request: the terms of its estimated time to
 * first token, computed once by the {@link Router} so the policies differ only in how they choose.
 *
 * @param worker           the worker's index
 * @param name             the worker's name
 * @param trusted          whether its index entries were used (false: stale, repairing; it is
 *                         covered as holding nothing and scored by load)
 * @param outstandingTokens prefill tokens routed to it and not completed
 * @param queueSeconds     outstanding tokens over its prefill rate
 * @param transferSeconds  bringing the prefix it does not compute into its engine
 * @param recomputeSeconds prompt tokens not covered, over its prefill rate
 * @param recomputeTokens  prompt tokens not covered
 * @param coverage         where the prefix would come from
 */
public record Candidate(int worker, String name, boolean trusted, long outstandingTokens, double queueSeconds,
                        double transferSeconds, double recomputeSeconds, long recomputeTokens, Coverage coverage) {

    /** Seconds of engine work this request adds: transfer + recompute. */
    public double workSeconds() {
        return transferSeconds + recomputeSeconds;
    }

    /** Estimated time to first token: queue wait + transfer + recompute. */
    public double ttftSeconds() {
        return queueSeconds + transferSeconds + recomputeSeconds;
    }
}
