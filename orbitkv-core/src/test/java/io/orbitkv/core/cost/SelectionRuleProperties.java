package io.orbitkv.core.cost;

import io.orbitkv.state.protocol.CompletionTarget;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/** Invariants of the guarded selection rule over random candidate sets. */
class SelectionRuleProperties {

    private static final double MARGIN = 0.05;
    private static final ResourceId DRAM = new ResourceId("dram:main", 1);
    private static final ResourceId PEER = new ResourceId("peer:b", 7);

    @Provide
    Arbitrary<Lookup> lookups() {
        Arbitrary<Lookup> warm = Combinators.combine(Arbitraries.doubles().between(1, 1e8),
                Arbitraries.doubles().between(0, 0.3)).as((m, e) -> new Lookup.Warm(new Estimate(m, e * m, 4, 0)));
        return Arbitraries.frequencyOf(
                net.jqwik.api.Tuple.of(6, warm),
                net.jqwik.api.Tuple.of(1, Arbitraries.longs().between(0, 3).map(Lookup.Cold::new)),
                net.jqwik.api.Tuple.of(1, Arbitraries.just(new Lookup.Missing())));
    }

    /** A candidate over one of five sources (two SSD routes, local and peer DRAM, an SSD restore), coverage 1–2. */
    @Provide
    Arbitrary<SourceCandidate> candidates() {
        Arbitrary<Integer> which = Arbitraries.integers().between(0, 4);
        return Combinators.combine(which, Arbitraries.integers().between(1, 2), lookups()).as((w, cov, l) -> {
            CostKey ssd = CostKeys.route(CostPath.SSD_URING, 1 << 16);
            return switch (w) {
                case 0 -> new SourceCandidate(ssd, SourceMedium.SSD, cov, l);
                case 1 -> new SourceCandidate(ssd.withPath(CostPath.SSD_POSITIONAL), SourceMedium.SSD, cov, l);
                case 2 -> new SourceCandidate(dram(CostPath.DRAM_COPY, DRAM, CompletionTarget.HOST_READY), SourceMedium.DRAM, cov, l);
                case 3 -> new SourceCandidate(dram(CostPath.PEER_FETCH, PEER, CompletionTarget.HOST_READY), SourceMedium.DRAM, cov, l);
                default -> new SourceCandidate(dram(CostPath.RESTORE_COPY, DRAM, CompletionTarget.ENGINE_RESTORE),
                        SourceMedium.DRAM, cov, l);
            };
        });
    }

    @Provide
    Arbitrary<List<SourceCandidate>> candidateLists() {
        return candidates().list().ofMaxSize(5);
    }

    private static CostKey dram(CostPath path, ResourceId resource, CompletionTarget target) {
        return new CostKey(path, SampleKind.ROUTE, resource, RepresentationFamily.RAW, target, Shape.of(1 << 16, 1));
    }

    @Provide
    Arbitrary<SelectionConfig> configs() {
        return Arbitraries.of(SelectionConfig.off(), SelectionConfig.sameMedium(), SelectionConfig.crossMedium());
    }

    @Property(tries = 400)
    void aSwitchIsAlwaysGuarded(@ForAll("configs") SelectionConfig config, @ForAll("candidates") SourceCandidate current,
                                @ForAll("candidateLists") List<SourceCandidate> alternatives) {
        Selection s = SelectionRule.choose(config, current, alternatives, MARGIN);
        if (!(s instanceof Selection.Switch(SourceCandidate chosen, Estimate cur, Estimate alt))) return;
        assertThat(config.selectionEnabled()).isTrue();
        assertThat(alternatives).contains(chosen);
        assertThat(chosen.key()).isNotEqualTo(current.key());
        assertThat(chosen.coveragePages()).isEqualTo(current.coveragePages());
        assertThat(chosen.key().target()).isEqualTo(CompletionTarget.HOST_READY);
        assertThat(current.key().target()).isEqualTo(CompletionTarget.HOST_READY);
        assertThat(current.lookup()).isEqualTo(new Lookup.Warm(cur));
        assertThat(chosen.lookup()).isEqualTo(new Lookup.Warm(alt));
        assertThat(ShadowRule.faster(cur, alt, MARGIN)).isTrue();
        if (chosen.medium() != current.medium()) {
            assertThat(config.crossMediumEnabled()).isTrue();
            assertThat(alternatives.stream().filter(a -> SelectionRule.eligible(current, a)))
                    .allMatch(a -> a.lookup() instanceof Lookup.Warm);
        }
    }

    @Property(tries = 300)
    void disabledNeverSwitches(@ForAll("candidates") SourceCandidate current,
                               @ForAll("candidateLists") List<SourceCandidate> alternatives) {
        assertThat(SelectionRule.choose(SelectionConfig.off(), current, alternatives, MARGIN))
                .isEqualTo(new Selection.Keep(Selection.KeepReason.DISABLED));
    }

    @Property(tries = 300)
    void theChosenSourceWouldNotSwitchBack(@ForAll("configs") SelectionConfig config,
                                           @ForAll("candidates") SourceCandidate current,
                                           @ForAll("candidateLists") List<SourceCandidate> alternatives) {
        if (!(SelectionRule.choose(config, current, alternatives, MARGIN) instanceof Selection.Switch(
                SourceCandidate chosen, Estimate ignored, Estimate ignored2))) return;
        Selection back = SelectionRule.choose(config, chosen, List.of(current), MARGIN);
        assertThat(back).isInstanceOf(Selection.Keep.class);
    }

    @Property(tries = 200)
    void sameMediumOnlyNeverCrossesMedia(@ForAll("candidates") SourceCandidate current,
                                         @ForAll("candidateLists") List<SourceCandidate> alternatives) {
        if (SelectionRule.choose(SelectionConfig.sameMedium(), current, alternatives, MARGIN)
                instanceof Selection.Switch(SourceCandidate chosen, Estimate ignored, Estimate ignored2)) {
            assertThat(chosen.medium()).isEqualTo(current.medium());
        }
    }
}
