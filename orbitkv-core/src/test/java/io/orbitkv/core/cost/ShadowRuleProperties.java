package io.orbitkv.core.cost;

import io.orbitkv.state.protocol.CompletionTarget;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.DoubleRange;

import static org.assertj.core.api.Assertions.assertThat;

/** The 5 % margin rule. */
class ShadowRuleProperties {

    private static final double MARGIN = 0.05;
    private static final CostKey URING = CostKeys.route(CostPath.SSD_URING, 1 << 20);
    private static final CostKey POSITIONAL = URING.withPath(CostPath.SSD_POSITIONAL);

    @Provide
    Arbitrary<Estimate> estimates() {
        return Combinators.combine(Arbitraries.doubles().between(0, 1e9), Arbitraries.doubles().between(0, 1e8))
                .as((m, e) -> new Estimate(m, e, 4, 0));
    }

    @Property(tries = 300)
    void neverFasterBothWays(@ForAll("estimates") Estimate a, @ForAll("estimates") Estimate b) {
        assertThat(ShadowRule.faster(a, b, MARGIN) && ShadowRule.faster(b, a, MARGIN)).isFalse();
    }

    @Property(tries = 300)
    void anEstimateIsNeverFasterThanItself(@ForAll("estimates") Estimate a) {
        assertThat(ShadowRule.faster(a, a, MARGIN)).isFalse();
    }

    @Property(tries = 300)
    void neverFasterWhenTheIntervalsAreWithinTheMargin(@ForAll("estimates") Estimate current,
                                                       @ForAll @DoubleRange(min = 0, max = 0.99) double slack) {
        // alternative's pessimistic time is at most 5 % below the current optimistic time
        double altUpper = (current.meanNanos() - current.errorNanos()) - slack * MARGIN * current.meanNanos();
        double altMean = Math.max(0, altUpper / 2);
        double altErr = Math.max(0, altUpper - altMean);
        Estimate alt = new Estimate(altMean, altErr, 4, 0);
        if (altUpper < 0) return; // no non-negative alternative sits that close; nothing to check
        assertThat(ShadowRule.faster(current, alt, MARGIN)).isFalse();
    }

    @Property(tries = 300)
    void fasterWhenClearlySeparated(@ForAll @DoubleRange(min = 1e3, max = 1e9) double mean,
                                    @ForAll @DoubleRange(min = 0, max = 0.4) double relErr) {
        Estimate current = new Estimate(mean, relErr * mean, 4, 0);
        double gap = mean * (1 - relErr) - 0.06 * mean; // just past the 5 % margin
        Estimate alt = new Estimate(gap * 0.9, gap * 0.09, 4, 0);
        assertThat(ShadowRule.faster(current, alt, MARGIN)).isTrue();
        assertThat(ShadowRule.compare(POSITIONAL, new Lookup.Warm(current), URING, new Lookup.Warm(alt), MARGIN))
                .isEqualTo(ShadowOutcome.FASTER);
    }

    @Property(tries = 200)
    void aMissingOrColdSideIsUnknownAndADifferentShapeIsIncomparable(@ForAll("estimates") Estimate a,
                                                                     @ForAll("estimates") Estimate b) {
        Lookup warmA = new Lookup.Warm(a);
        Lookup warmB = new Lookup.Warm(b);
        assertThat(ShadowRule.compare(POSITIONAL, warmA, URING, new Lookup.Cold(3), MARGIN)).isEqualTo(ShadowOutcome.UNKNOWN);
        assertThat(ShadowRule.compare(POSITIONAL, new Lookup.Missing(), URING, warmB, MARGIN)).isEqualTo(ShadowOutcome.UNKNOWN);
        CostKey otherShape = CostKeys.route(CostPath.SSD_URING, 1 << 21);
        assertThat(ShadowRule.compare(POSITIONAL, warmA, otherShape, warmB, MARGIN)).isEqualTo(ShadowOutcome.INCOMPARABLE);
        CostKey otherTarget = new CostKey(CostPath.SSD_URING, SampleKind.ROUTE, CostKeys.STORE, RepresentationFamily.RAW,
                CompletionTarget.ENGINE_RESTORE, URING.shape());
        assertThat(ShadowRule.compare(POSITIONAL, warmA, otherTarget, warmB, MARGIN)).isEqualTo(ShadowOutcome.INCOMPARABLE);
        CostKey otherStore = new CostKey(CostPath.SSD_URING, SampleKind.ROUTE, new ResourceId("ssd:/tmp/store", 2),
                RepresentationFamily.RAW, CompletionTarget.HOST_READY, URING.shape());
        assertThat(ShadowRule.compare(POSITIONAL, warmA, otherStore, warmB, MARGIN)).isEqualTo(ShadowOutcome.INCOMPARABLE);
        CostKey encoded = new CostKey(CostPath.SSD_URING, SampleKind.ROUTE, CostKeys.STORE, RepresentationFamily.ENCODED,
                CompletionTarget.HOST_READY, URING.shape());
        assertThat(ShadowRule.compare(POSITIONAL, warmA, encoded, warmB, MARGIN)).isEqualTo(ShadowOutcome.INCOMPARABLE);
        assertThat(ShadowRule.compare(POSITIONAL, warmA, URING.withKind(SampleKind.OPERATION), warmB, MARGIN))
                .isEqualTo(ShadowOutcome.INCOMPARABLE);
        assertThat(ShadowRule.compare(POSITIONAL, warmA, POSITIONAL.withPath(CostPath.DRAM_COPY), warmB, MARGIN))
                .isEqualTo(ShadowOutcome.INCOMPARABLE);
    }

    @Property(tries = 300)
    void comparableWarmPairsAreFasterOrWithinMargin(@ForAll("estimates") Estimate a, @ForAll("estimates") Estimate b) {
        ShadowOutcome o = ShadowRule.compare(POSITIONAL, new Lookup.Warm(a), URING, new Lookup.Warm(b), MARGIN);
        assertThat(o).isEqualTo(ShadowRule.faster(a, b, MARGIN) ? ShadowOutcome.FASTER : ShadowOutcome.WITHIN_MARGIN);
    }
}
