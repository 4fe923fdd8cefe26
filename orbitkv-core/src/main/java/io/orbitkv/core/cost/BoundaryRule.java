package io.orbitkv.core.cost;

import java.util.List;

/**
 * Chooses among a bounded set of legal boundaries by estimated time to first token. Pure.
 *
 * <p>For a boundary {@code t}: {@code first_token(t) = max(admission, state_ready(t)) +
 * (prompt_tokens − t) / prefill_rate}, the remaining prefill at the engine's measured rate.
 * The longest boundary is the default; a shorter one wins only when every candidate has a warm
 * estimate, the prefill rate is known, and the shorter boundary's <em>pessimistic</em> first
 * token (ready = mean + error) beats the longest's <em>optimistic</em> one (ready = mean −
 * error) by more than the margin fraction of the longest's estimate: the shadow margin rule
 * applied to complete first-token times. Among winners the smallest pessimistic time is taken.
 *
 * <p>Invariants: at most {@value #MAX_CANDIDATES} candidates, longest first, strictly
 * decreasing, none above the prompt; without a prefill rate or warm estimates the answer is
 * always the longest boundary.
 *
 * <p>Design note: eight candidates cover the longest boundary, the longest DRAM-only one and
 * the boundaries where the route changes (one per medium and attention-group checkpoint in
 * practice), while keeping the rule O(8) per query. The asymmetric bounds mean that noisy SSD
 * estimates (5–10 % jitter) never shorten a boundary: recomputation is certain work, a
 * shortened boundary must be clearly faster to be worth it.
 */
public final class BoundaryRule {

    /** Candidates compared at most per query. */
    public static final int MAX_CANDIDATES = 8;

    private BoundaryRule() {}

    /**
     * @param candidates              legal boundaries, longest first, 1..{@value #MAX_CANDIDATES}
     * @param promptTokens            tokens in the prompt
     * @param admissionNanos          estimated time until the query is admitted
     * @param prefillTokensPerSecond  the engine's measured prefill rate; 0 = unknown
     * @param marginFraction          the switching margin (the shadow margin, 0.05)
     */
    public static BoundaryChoice choose(List<BoundaryCandidate> candidates, long promptTokens, long admissionNanos,
                                        double prefillTokensPerSecond, double marginFraction) {
        check(candidates, promptTokens);
        if (!(prefillTokensPerSecond >= 0)) throw new IllegalArgumentException("prefill rate: " + prefillTokensPerSecond);
        BoundaryCandidate longest = candidates.getFirst();
        if (candidates.size() == 1) return new BoundaryChoice(longest, BoundaryChoice.Basis.ONLY_CANDIDATE, -1);
        if (prefillTokensPerSecond == 0) return new BoundaryChoice(longest, BoundaryChoice.Basis.NO_PREFILL_RATE, -1);
        if (!candidates.stream().allMatch(c -> c.stateReady() instanceof Lookup.Warm)) {
            return new BoundaryChoice(longest, BoundaryChoice.Basis.NO_ESTIMATE, -1);
        }
        double longestOptimistic = firstToken(longest, -1, promptTokens, admissionNanos, prefillTokensPerSecond);
        double longestPessimistic = firstToken(longest, +1, promptTokens, admissionNanos, prefillTokensPerSecond);
        BoundaryCandidate best = null;
        double bestNanos = Double.POSITIVE_INFINITY;
        for (BoundaryCandidate c : candidates.subList(1, candidates.size())) {
            double pessimistic = firstToken(c, +1, promptTokens, admissionNanos, prefillTokensPerSecond);
            if (longestOptimistic - pessimistic > marginFraction * longestOptimistic && pessimistic < bestNanos) {
                best = c;
                bestNanos = pessimistic;
            }
        }
        if (best == null) return new BoundaryChoice(longest, BoundaryChoice.Basis.LONGEST_BY_ESTIMATE, longestPessimistic);
        return new BoundaryChoice(best, BoundaryChoice.Basis.SHORTENED_BY_ESTIMATE, bestNanos);
    }

    /** {@code first_token} with ready = mean + sign × error (clamped at 0). */
    static double firstToken(BoundaryCandidate c, int sign, long promptTokens, long admissionNanos, double rate) {
        Estimate e = ((Lookup.Warm) c.stateReady()).estimate();
        double ready = Math.max(0, e.meanNanos() + sign * e.errorNanos());
        double prefillNanos = (promptTokens - c.boundaryTokens()) * 1e9 / rate;
        return Math.max(admissionNanos, ready) + prefillNanos;
    }

    private static void check(List<BoundaryCandidate> candidates, long promptTokens) {
        if (candidates.isEmpty() || candidates.size() > MAX_CANDIDATES) {
            throw new IllegalArgumentException("1.." + MAX_CANDIDATES + " candidates, got " + candidates.size());
        }
        long previous = Long.MAX_VALUE;
        for (BoundaryCandidate c : candidates) {
            if (c.boundaryTokens() >= previous) throw new IllegalArgumentException("boundaries must strictly decrease");
            if (c.boundaryTokens() > promptTokens) throw new IllegalArgumentException("boundary above the prompt");
            previous = c.boundaryTokens();
        }
    }
}
