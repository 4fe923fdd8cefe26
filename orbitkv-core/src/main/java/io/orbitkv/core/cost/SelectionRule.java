package io.orbitkv.core.cost;

import io.orbitkv.state.protocol.CompletionTarget;
import java.util.List;

/**
 * The guarded selection rule: which of several equal-coverage {@code HOST_READY} sources serves
 * a read. Pure; the caller supplies the estimator's lookups.
 *
 * <p>Rule, in order:
 * <ol>
 *   <li>selection off: {@link Selection.KeepReason#DISABLED};</li>
 *   <li>an alternative is <em>eligible</em> when it is a different route or resource than the
 *       default, covers the same number of pages, and its key has the same sample kind,
 *       {@link CompletionTarget#HOST_READY} target, representation and shape as the default's
 *       ({@code HOST_READY} only: an {@code ENGINE_RESTORE} route never competes here);</li>
 *   <li>a <em>same-medium</em> eligible alternative may win; a <em>cross-medium</em> one only
 *       when cross-medium selection is on <em>and</em> the default and every eligible candidate
 *       (all media) hold a warm, unexpired estimate: stale evidence about one copy never moves
 *       reads to another copy;</li>
 *   <li>a candidate wins only by {@link ShadowRule#faster} against the default (its mean +
 *       error below the default's mean − error by more than the margin); among winners the
 *       smallest mean + error is taken (ties: the first listed).</li>
 * </ol>
 *
 * <p>Invariants (property-tested): never a switch when disabled, to a cold or missing estimate,
 * to a different coverage or target, or across media without the flag and full evidence; a
 * chosen source would not switch back (the margin rule is asymmetric), so selection cannot flap
 * on a fixed set of estimates.
 *
 * <p>Design note: reusing the shadow margin (5 %) means selection acts only where shadow
 * already reports {@link ShadowOutcome#FASTER}; the O_DIRECT jitter measured here is 5–10 %,
 * so a plain mean comparison would alternate routes on noise. Requiring evidence for every
 * candidate before a media switch follows the seed's rule that a DRAM copy is the default and
 * a slower medium must earn its turn with current measurements.
 */
public final class SelectionRule {

    private SelectionRule() {}

    public static Selection choose(SelectionConfig config, SourceCandidate defaultSource,
                                   List<SourceCandidate> alternatives, double marginFraction) {
        if (!config.selectionEnabled()) return new Selection.Keep(Selection.KeepReason.DISABLED);
        List<SourceCandidate> eligible = alternatives.stream().filter(a -> eligible(defaultSource, a)).toList();
        if (eligible.isEmpty()) return new Selection.Keep(Selection.KeepReason.NO_ALTERNATIVE);
        if (!(defaultSource.lookup() instanceof Lookup.Warm(Estimate current))) {
            return new Selection.Keep(Selection.KeepReason.NO_EVIDENCE);
        }
        boolean allWarm = eligible.stream().allMatch(a -> a.lookup() instanceof Lookup.Warm);
        boolean mayCrossMedia = config.crossMediumEnabled() && allWarm;
        SourceCandidate best = null;
        Estimate bestEstimate = null;
        boolean anyWarm = false;
        for (SourceCandidate a : eligible) {
            if (!(a.lookup() instanceof Lookup.Warm(Estimate alt))) continue;
            boolean sameMedium = a.medium() == defaultSource.medium();
            if (!sameMedium && !mayCrossMedia) continue;
            anyWarm = true;
            if (!ShadowRule.faster(current, alt, marginFraction)) continue;
            if (bestEstimate == null || pessimistic(alt) < pessimistic(bestEstimate)) {
                best = a;
                bestEstimate = alt;
            }
        }
        if (best != null) return new Selection.Switch(best, current, bestEstimate);
        return new Selection.Keep(anyWarm ? Selection.KeepReason.WITHIN_MARGIN : Selection.KeepReason.NO_EVIDENCE);
    }

    /** Whether {@code alternative} serves exactly the default's work from another route or resource. */
    public static boolean eligible(SourceCandidate defaultSource, SourceCandidate alternative) {
        CostKey d = defaultSource.key();
        CostKey a = alternative.key();
        return !d.equals(a)
                && d.target() == CompletionTarget.HOST_READY
                && a.target() == CompletionTarget.HOST_READY
                && d.kind() == a.kind()
                && d.representation() == a.representation()
                && d.shape().equals(a.shape())
                && defaultSource.coveragePages() == alternative.coveragePages();
    }

    private static double pessimistic(Estimate e) {
        return e.meanNanos() + e.errorNanos();
    }
}
