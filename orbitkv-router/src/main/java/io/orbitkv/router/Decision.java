package io.orbitkv.router;

import java.util.List;

/**
 * The answer to one route request: the chosen worker with its score terms, and every candidate
 * (for the JSON answer and for comparing policies).
 *
 * @param chosen        the chosen worker's candidate
 * @param policy        the policy's name
 * @param chargedTokens prefill tokens added to the chosen worker's outstanding work; give them back
 *                      with {@link Router#completed}
 * @param fallback      true when at least one worker was scored by load only (untrusted index)
 * @param candidates    every worker, in worker order
 * @param outlook       what the router measured of the cluster for this decision (read by joint only)
 */
public record Decision(Candidate chosen, String policy, long chargedTokens, boolean fallback, List<Candidate> candidates,
                       Outlook outlook) {

    public Decision {
        candidates = List.copyOf(candidates);
    }

    public int worker() {
        return chosen.worker();
    }
}
