package io.orbitkv.core.cost;

/**
 * The guarded comparison between the executed route's estimate and one alternative's. Pure.
 *
 * <p>Rule: the alternative is {@link ShadowOutcome#FASTER} only if
 * {@code (current.mean − current.error) − (alt.mean + alt.error) > margin × current.mean}:
 * its pessimistic time beats the current route's optimistic time by more than the declared
 * margin (5 %). Both must be warm, else {@link ShadowOutcome#UNKNOWN}; keys that differ in
 * anything but the path (kind, target, resource, representation, shape), or whose paths
 * cannot execute the same work, are {@link ShadowOutcome#INCOMPARABLE} whatever the estimates.
 *
 * <p>Design note: the error term is an EWMA of absolute deviation, an empirical spread rather
 * than a calibrated interval; requiring the two intervals to be separated by a margin on top
 * of it keeps noise (the typical O_DIRECT jitter is 5–10 %) from being reported as a speedup.
 */
public final class ShadowRule {

    private ShadowRule() {}

    /** Whether {@code alternative} describes the same work as {@code current} on another path. */
    public static boolean comparable(CostKey current, CostKey alternative) {
        return current.path() != alternative.path()
                && current.path().sameSourceAs(alternative.path())
                && current.kind() == alternative.kind()
                && current.target() == alternative.target()
                && current.resource().equals(alternative.resource())
                && current.representation() == alternative.representation()
                && current.shape().equals(alternative.shape());
    }

    public static ShadowOutcome compare(CostKey current, Lookup currentLookup, CostKey alternative,
                                        Lookup alternativeLookup, double marginFraction) {
        if (!comparable(current, alternative)) return ShadowOutcome.INCOMPARABLE;
        if (currentLookup instanceof Lookup.Warm(Estimate cur) && alternativeLookup instanceof Lookup.Warm(Estimate alt)) {
            return faster(cur, alt, marginFraction) ? ShadowOutcome.FASTER : ShadowOutcome.WITHIN_MARGIN;
        }
        return ShadowOutcome.UNKNOWN;
    }

    /** The margin rule on two warm estimates. */
    public static boolean faster(Estimate current, Estimate alternative, double marginFraction) {
        double gap = (current.meanNanos() - current.errorNanos()) - (alternative.meanNanos() + alternative.errorNanos());
        return gap > marginFraction * current.meanNanos();
    }
}
