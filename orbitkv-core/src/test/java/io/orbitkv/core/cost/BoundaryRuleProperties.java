package io.orbitkv.core.cost;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.DoubleRange;
import net.jqwik.api.constraints.LongRange;

import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;

import static org.assertj.core.api.Assertions.assertThat;

/** Invariants of the first-token boundary rule. */
class BoundaryRuleProperties {

    private static final long PROMPT = 8_192;

    @Provide
    Arbitrary<List<BoundaryCandidate>> candidateSets() {
        Arbitrary<Lookup> lookup = Arbitraries.frequencyOf(
                net.jqwik.api.Tuple.of(8, Combinators.combine(Arbitraries.doubles().between(0, 5e8),
                        Arbitraries.doubles().between(0, 0.3)).as((m, e) -> (Lookup) new Lookup.Warm(new Estimate(m, m * e, 4, 0)))),
                net.jqwik.api.Tuple.of(1, Arbitraries.just(new Lookup.Missing())));
        Arbitrary<TreeSet<Long>> tokens = Arbitraries.longs().between(16, PROMPT).set().ofMinSize(1).ofMaxSize(8)
                .map(s -> new TreeSet<>(s));
        return tokens.flatMap(set -> lookup.list().ofSize(set.size()).map(lookups -> {
            List<BoundaryCandidate> out = new ArrayList<>();
            int i = 0;
            for (long t : set.descendingSet()) {
                out.add(new BoundaryCandidate(t, i == 0 ? SourceMedium.SSD : SourceMedium.DRAM, lookups.get(i)));
                i++;
            }
            return out;
        }));
    }

    @Property(tries = 300)
    void aShortenedBoundaryIsClearlyFasterThanTheLongestsBestCase(
            @ForAll("candidateSets") List<BoundaryCandidate> candidates,
            @ForAll @LongRange(min = 0, max = 100_000_000) long admission,
            @ForAll @DoubleRange(min = 100, max = 1e6) double rate) {
        BoundaryChoice c = BoundaryRule.choose(candidates, PROMPT, admission, rate, 0.05);
        assertThat(candidates).contains(c.chosen());
        if (c.basis() != BoundaryChoice.Basis.SHORTENED_BY_ESTIMATE) {
            assertThat(c.chosen()).isEqualTo(candidates.getFirst());
            return;
        }
        assertThat(c.chosen()).isNotEqualTo(candidates.getFirst());
        double longestBest = BoundaryRule.firstToken(candidates.getFirst(), -1, PROMPT, admission, rate);
        assertThat(c.firstTokenNanos()).isLessThan(longestBest * 0.95);
    }

    @Property(tries = 200)
    void noRateOrAnyMissingEstimateMeansTheLongest(@ForAll("candidateSets") List<BoundaryCandidate> candidates,
                                                    @ForAll @DoubleRange(min = 100, max = 1e6) double rate) {
        assertThat(BoundaryRule.choose(candidates, PROMPT, 0, 0, 0.05).chosen()).isEqualTo(candidates.getFirst());
        if (candidates.stream().anyMatch(c -> !(c.stateReady() instanceof Lookup.Warm))) {
            assertThat(BoundaryRule.choose(candidates, PROMPT, 0, rate, 0.05).chosen()).isEqualTo(candidates.getFirst());
        }
    }
}
