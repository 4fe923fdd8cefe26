package io.orbitkv.core.cost;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

import static org.assertj.core.api.Assertions.assertThat;

/** The observer: censored samples, separate kinds, unknown bytes, metrics, shadow flips, the env switch. */
class CostObserverTest {

    private final AtomicLong clock = new AtomicLong();
    private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
    private final CostObserver observer = CostObserver.create(CostConfig.defaults(true), registry, clock::get);
    private final CostKey positional = CostKeys.route(CostPath.SSD_POSITIONAL, 1 << 20);
    private final CostKey uring = positional.withPath(CostPath.SSD_URING);

    @Test
    void onlyTheEnvironmentValueOneEnablesObservations() {
        assertThat(CostConfig.fromEnvironment(Map.of("ORBITKV_COST_OBSERVATIONS", "1")).observationsEnabled()).isTrue();
        assertThat(CostConfig.fromEnvironment(Map.of("ORBITKV_COST_OBSERVATIONS", "0")).observationsEnabled()).isFalse();
        assertThat(CostConfig.fromEnvironment(Map.of("ORBITKV_COST_OBSERVATIONS", "true")).observationsEnabled()).isFalse();
        assertThat(CostConfig.fromEnvironment(Map.of()).observationsEnabled()).isFalse();
        SimpleMeterRegistry r = new SimpleMeterRegistry();
        CostObserver off = CostObserver.create(CostConfig.disabled(), r, clock::get);
        off.record(CostKeys.ok(positional, 10, 10));
        assertThat(off.enabled()).isFalse();
        assertThat(off.status().enabled()).isFalse();
        assertThat(r.getMeters()).isEmpty();
    }

    @Test
    void operationAndRouteSamplesTrainSeparateEntriesAndAreNeverAdded() {
        for (int i = 0; i < 4; i++) observer.record(CostKeys.ok(positional, 300, 700));
        Lookup.Warm op = (Lookup.Warm) observer.estimate(positional.withKind(SampleKind.OPERATION));
        Lookup.Warm route = (Lookup.Warm) observer.estimate(positional);
        assertThat(op.estimate().meanNanos()).isEqualTo(700);
        assertThat(route.estimate().meanNanos()).isEqualTo(1000);
        assertThat(observer.status().trained()).isEqualTo(8);
    }

    @Test
    void failedCancelledAndTimedOutOperationsAreCountedButNeverTrain() {
        for (int i = 0; i < 3; i++) observer.record(CostKeys.ok(positional, 0, 100));
        observer.record(CostKeys.observation(positional, Terminal.FAILED, 0, 1));
        observer.record(CostKeys.observation(positional, Terminal.CANCELLED, 0, 1));
        observer.record(CostKeys.observation(positional, Terminal.TIMED_OUT, 0, 1_000_000));
        assertThat(observer.estimate(positional)).isEqualTo(new Lookup.Cold(3));
        CostStatus s = observer.status();
        assertThat(s.censored()).containsEntry(Terminal.FAILED, 1L).containsEntry(Terminal.CANCELLED, 1L)
                .containsEntry(Terminal.TIMED_OUT, 1L);
        assertThat(registry.get("orbitkv.cost.operations").tag("path", "ssd_positional").tag("terminal", "timed_out")
                .counter().count()).isEqualTo(1);
        // the censored samples' durations never reached the stage timers as successes' estimate
        observer.record(CostKeys.ok(positional, 0, 100));
        assertThat(((Lookup.Warm) observer.estimate(positional)).estimate().meanNanos()).isEqualTo(100);
    }

    @Test
    void unknownBytesAreCountedAsUnknownNotAsZero() {
        Timeline t = new Timeline(0, 10, 20, 30);
        observer.record(new Observation(positional, Terminal.SUCCEEDED, t, ByteCount.unknown(), ByteCount.known(4096)));
        observer.record(new Observation(positional, Terminal.SUCCEEDED, t, ByteCount.known(100), ByteCount.unknown()));
        assertThat(registry.get("orbitkv.cost.logical.unknown").tag("path", "ssd_positional").counter().count()).isEqualTo(1);
        assertThat(registry.get("orbitkv.cost.io.unknown").tag("path", "ssd_positional").counter().count()).isEqualTo(1);
        assertThat(registry.get("orbitkv.cost.logical.bytes").tag("path", "ssd_positional").counter().count()).isEqualTo(100);
        assertThat(registry.get("orbitkv.cost.io.bytes").tag("path", "ssd_positional").counter().count()).isEqualTo(4096);
        assertThat(observer.status().logicalUnknown()).isEqualTo(1);
        assertThat(observer.status().ioUnknown()).isEqualTo(1);
        assertThat(registry.get("orbitkv.cost.stage").tag("path", "ssd_positional").tag("stage", "total").timer()
                .totalTime(java.util.concurrent.TimeUnit.NANOSECONDS)).isEqualTo(60);
        assertThat(registry.get("orbitkv.cost.stage").tag("path", "ssd_positional").tag("stage", "queue").timer()
                .totalTime(java.util.concurrent.TimeUnit.NANOSECONDS)).isEqualTo(20);
    }

    @Test
    void shadowFlipsToFasterOnceTheAlternativeIsWarmAndClearlyFaster() {
        List<ShadowComparison> first = observer.recordAndShadow(CostKeys.ok(positional, 0, 1_000_000), List.of(uring));
        assertThat(first).singleElement().extracting(ShadowComparison::outcome).isEqualTo(ShadowOutcome.UNKNOWN);
        for (int i = 0; i < 4; i++) observer.record(CostKeys.ok(positional, 0, 1_000_000));
        for (int i = 0; i < 3; i++) observer.record(CostKeys.ok(uring, 0, 400_000));
        assertThat(observer.shadow(positional, List.of(uring))).singleElement()
                .extracting(ShadowComparison::outcome).isEqualTo(ShadowOutcome.UNKNOWN); // uring still cold (3)
        observer.record(CostKeys.ok(uring, 0, 400_000));
        List<ShadowComparison> now = observer.recordAndShadow(CostKeys.ok(positional, 0, 1_000_000), List.of(uring));
        assertThat(now).singleElement().extracting(ShadowComparison::outcome).isEqualTo(ShadowOutcome.FASTER);
        // and the other way round it is not faster
        assertThat(observer.shadow(uring, List.of(positional))).singleElement()
                .extracting(ShadowComparison::outcome).isEqualTo(ShadowOutcome.WITHIN_MARGIN);
        // a near-equal alternative stays within the margin
        CostKey big = CostKeys.route(CostPath.SSD_POSITIONAL, 1 << 21);
        for (int i = 0; i < 4; i++) {
            observer.record(CostKeys.ok(big, 0, 1_000_000));
            observer.record(CostKeys.ok(big.withPath(CostPath.SSD_URING), 0, 970_000));
        }
        assertThat(observer.shadow(big, List.of(big.withPath(CostPath.SSD_URING)))).singleElement()
                .extracting(ShadowComparison::outcome).isEqualTo(ShadowOutcome.WITHIN_MARGIN);
        CostStatus s = observer.status();
        assertThat(s.shadow()).containsEntry(ShadowOutcome.FASTER, 1L).containsEntry(ShadowOutcome.UNKNOWN, 2L)
                .containsEntry(ShadowOutcome.WITHIN_MARGIN, 2L);
        assertThat(registry.get("orbitkv.cost.shadow").tag("outcome", "faster").counter().count()).isEqualTo(1);
    }

    @Test
    void shadowNeverChangesTheEstimates() {
        for (int i = 0; i < 4; i++) observer.record(CostKeys.ok(positional, 0, 1_000));
        Lookup before = observer.estimate(positional);
        observer.shadow(positional, List.of(uring));
        assertThat(observer.estimate(positional)).isEqualTo(before);
        assertThat(observer.estimate(uring)).isInstanceOf(Lookup.Missing.class);
    }
}
