package io.orbitkv.core.cost;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.state.protocol.CompletionTarget;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** DRAM vs SSD (cross medium), same-medium peers, and the environment switches. */
class SelectionRuleTest {

    private static final CostKey SSD = CostKeys.route(CostPath.SSD_URING, 1 << 16);
    private static final CostKey DRAM = new CostKey(CostPath.DRAM_COPY, SampleKind.ROUTE, new ResourceId("dram:main", 1),
            RepresentationFamily.RAW, CompletionTarget.HOST_READY, Shape.of(1 << 16, 1));
    private static final CostKey PEER_DRAM = new CostKey(CostPath.PEER_FETCH, SampleKind.ROUTE,
            new ResourceId("peer:b", 3), RepresentationFamily.RAW, CompletionTarget.HOST_READY, Shape.of(1 << 16, 1));

    private static Lookup warm(double meanNanos) {
        return new Lookup.Warm(new Estimate(meanNanos, 0, 4, 0));
    }

    @Test
    void crossMediumNeedsTheFlagAndFreshEvidenceForEveryCandidate() {
        // an odd moment: the DRAM copy path measured slow (50 µs), the SSD route fast (5 µs)
        SourceCandidate dram = new SourceCandidate(DRAM, SourceMedium.DRAM, 4, warm(50_000));
        SourceCandidate ssd = new SourceCandidate(SSD, SourceMedium.SSD, 4, warm(5_000));
        assertThat(SelectionRule.choose(SelectionConfig.sameMedium(), dram, List.of(ssd), 0.05))
                .isEqualTo(new Selection.Keep(Selection.KeepReason.NO_EVIDENCE));
        assertThat(SelectionRule.choose(SelectionConfig.crossMedium(), dram, List.of(ssd), 0.05))
                .isInstanceOf(Selection.Switch.class);
        // one candidate without a warm estimate: no media switch, even with the flag
        SourceCandidate coldPeer = new SourceCandidate(PEER_DRAM, SourceMedium.DRAM, 4, new Lookup.Cold(2));
        assertThat(SelectionRule.choose(SelectionConfig.crossMedium(), dram, List.of(ssd, coldPeer), 0.05))
                .isEqualTo(new Selection.Keep(Selection.KeepReason.NO_EVIDENCE));
        // the normal case: DRAM fast, SSD slow: never leaves DRAM
        SourceCandidate fastDram = new SourceCandidate(DRAM, SourceMedium.DRAM, 4, warm(5_000));
        SourceCandidate slowSsd = new SourceCandidate(SSD, SourceMedium.SSD, 4, warm(500_000));
        assertThat(SelectionRule.choose(SelectionConfig.crossMedium(), fastDram, List.of(slowSsd), 0.05))
                .isEqualTo(new Selection.Keep(Selection.KeepReason.WITHIN_MARGIN));
    }

    @Test
    void aPeerDramOwnerOfEqualCoverageIsSameMediumAndACoverageMismatchNeverCompetes() {
        SourceCandidate local = new SourceCandidate(DRAM, SourceMedium.DRAM, 4, warm(80_000));
        SourceCandidate peer = new SourceCandidate(PEER_DRAM, SourceMedium.DRAM, 4, warm(20_000));
        SourceCandidate shorterPeer = new SourceCandidate(PEER_DRAM, SourceMedium.DRAM, 3, warm(1_000));
        assertThat(SelectionRule.choose(SelectionConfig.sameMedium(), local, List.of(peer), 0.05))
                .isEqualTo(new Selection.Switch(peer, new Estimate(80_000, 0, 4, 0), new Estimate(20_000, 0, 4, 0)));
        assertThat(SelectionRule.choose(SelectionConfig.sameMedium(), local, List.of(shorterPeer), 0.05))
                .isEqualTo(new Selection.Keep(Selection.KeepReason.NO_ALTERNATIVE));
    }

    @Test
    void theObserverCountsDecisionsAndNeverSelectsWithoutObservations() {
        AtomicLong clock = new AtomicLong();
        CostObserver observer = CostObserver.create(CostConfig.defaults(true), SelectionConfig.sameMedium(),
                new SimpleMeterRegistry(), clock::get);
        CostKey positional = SSD.withPath(CostPath.SSD_POSITIONAL);
        for (int i = 0; i < 4; i++) {
            observer.record(CostKeys.ok(SSD, 0, 1_000_000));
            observer.record(CostKeys.ok(positional, 0, 100_000));
        }
        Selection s = observer.select(new SourceOffer(SSD, SourceMedium.SSD, 1),
                List.of(new SourceOffer(positional, SourceMedium.SSD, 1)));
        assertThat(s).isInstanceOf(Selection.Switch.class);
        assertThat(observer.selectionSwitched()).isEqualTo(1);
        assertThat(observer.status().selection().switched()).isEqualTo(1);
        assertThat(observer.status().selection().enabled()).isTrue();
        assertThat(observer.status().selection().crossMedium()).isFalse();
        clock.addAndGet(java.time.Duration.ofMinutes(6).toNanos()); // evidence expires: back to the default
        assertThat(observer.select(new SourceOffer(SSD, SourceMedium.SSD, 1),
                List.of(new SourceOffer(positional, SourceMedium.SSD, 1))))
                .isEqualTo(new Selection.Keep(Selection.KeepReason.NO_EVIDENCE));

        CostObserver off = CostObserver.create(CostConfig.disabled(), SelectionConfig.crossMedium(),
                new SimpleMeterRegistry(), clock::get);
        assertThat(off.selectionEnabled()).isFalse();
        assertThat(off.select(new SourceOffer(SSD, SourceMedium.SSD, 1), List.of()))
                .isEqualTo(new Selection.Keep(Selection.KeepReason.DISABLED));
    }

    @Test
    void environmentVariablesLayerObservationsSelectionAndCrossMedium() {
        assertThat(SelectionConfig.fromEnvironment(Map.of("ORBITKV_COST_SELECTION", "1"))).isEqualTo(SelectionConfig.off());
        assertThat(SelectionConfig.fromEnvironment(Map.of("ORBITKV_COST_OBSERVATIONS", "1",
                "ORBITKV_COST_SELECTION", "1"))).isEqualTo(SelectionConfig.sameMedium());
        assertThat(SelectionConfig.fromEnvironment(Map.of("ORBITKV_COST_OBSERVATIONS", "1",
                "ORBITKV_CROSS_MEDIUM_SELECTION", "1"))).isEqualTo(SelectionConfig.off());
        assertThat(SelectionConfig.fromEnvironment(Map.of("ORBITKV_COST_OBSERVATIONS", "1",
                "ORBITKV_COST_SELECTION", "1", "ORBITKV_CROSS_MEDIUM_SELECTION", "1"))).isEqualTo(SelectionConfig.crossMedium());
        assertThatThrownBy(() -> new SelectionConfig(false, true)).isInstanceOf(IllegalArgumentException.class);
    }
}
