package io.orbitkv.core.storage.ssd;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.cost.ByteCount;
import io.orbitkv.core.cost.CostConfig;
import io.orbitkv.core.cost.CostKey;
import io.orbitkv.core.cost.CostObserver;
import io.orbitkv.core.cost.Lookup;
import io.orbitkv.core.cost.Observation;
import io.orbitkv.core.cost.Selection;
import io.orbitkv.core.cost.SelectionConfig;
import io.orbitkv.core.cost.ShadowOutcome;
import io.orbitkv.core.cost.Terminal;
import io.orbitkv.core.cost.Timeline;
import io.orbitkv.core.storage.residency.ResidencyStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicLong;

import static io.orbitkv.core.storage.ssd.SsdTestSupport.key;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Guarded route selection per read on one store (same medium, same extent): injected latencies
 * make io_uring (the {@code auto} default) slow and positional fast; shadow reports FASTER and,
 * only with selection on and the route not forced, the next read goes positional.
 */
class SsdRouteSelectionTest {

    private static final int LENGTH = 65_536;

    @TempDir
    Path dir;

    private SsdConfig config(ReadPath path) {
        return SsdTestSupport.smallConfig(dir, 2, 512).withReadPath(path).withUringInflightReads(8);
    }

    private record Run(ReadPath servedBy, long switched, long fasterShadows) {}

    /** Injects warm estimates (uring 10 ms, positional 1 µs), then does one real read and reports its route. */
    private Run readOnceAfterInjecting(ReadPath setting, SelectionConfig selection) throws IOException {
        AtomicLong clock = new AtomicLong();
        CostObserver observer = CostObserver.create(CostConfig.defaults(true), selection, new SimpleMeterRegistry(),
                clock::get);
        try (SsdStore s = SsdStore.open(config(setting), new ResidencyStream(4096), new SimpleMeterRegistry(), observer)) {
            s.recover();
            assertThat(s.readPath()).isEqualTo(ReadPath.URING); // io_uring is allowed on these hosts
            try (Pin pin = (Pin) s.pin(key(0), SsdTestSupport.NS)) {
                CostKey uringKey = s.costKey(ReadPath.URING, pin);
                CostKey positionalKey = s.costKey(ReadPath.POSITIONAL, pin);
                inject(observer, uringKey, 10_000_000, 4);
                inject(observer, positionalKey, 1_000, 4);
                assertThat(s.read(pin, SsdTestSupport.SHARED.allocate(pin.paddedPayloadBytes(), 4096)).join())
                        .isEqualTo(new ReadResult.Served(LENGTH, false));
                long uringSamples = samples(observer, uringKey);
                long positionalSamples = samples(observer, positionalKey);
                assertThat(uringSamples + positionalSamples).isEqualTo(9); // exactly one real read trained
                ReadPath servedBy = positionalSamples == 5 ? ReadPath.POSITIONAL : ReadPath.URING;
                return new Run(servedBy, observer.selectionSwitched(),
                        observer.status().shadow().getOrDefault(ShadowOutcome.FASTER, 0L));
            }
        }
    }

    private static void inject(CostObserver observer, CostKey key, long nanos, int n) {
        for (int i = 0; i < n; i++) {
            observer.record(new Observation(key, Terminal.SUCCEEDED, new Timeline(0, 0, 0, nanos),
                    ByteCount.known(LENGTH), ByteCount.known(LENGTH + 4096)));
        }
    }

    private static long samples(CostObserver observer, CostKey key) {
        return switch (observer.estimate(key)) {
            case Lookup.Warm w -> w.estimate().samples();
            case Lookup.Cold c -> c.samples();
            case Lookup.Missing m -> 0;
        };
    }

    private void writeExtent() throws IOException {
        try (SsdTestSupport s = SsdTestSupport.openRecovered(config(ReadPath.POSITIONAL))) {
            s.writeCommitted(0, LENGTH);
        }
    }

    @Test
    void selectionOnSwitchesTheReadToTheRouteMeasuredFaster() throws IOException {
        writeExtent();
        Run run = readOnceAfterInjecting(ReadPath.AUTO, SelectionConfig.sameMedium());
        assertThat(run.servedBy()).isEqualTo(ReadPath.POSITIONAL);
        assertThat(run.switched()).isEqualTo(1);
    }

    @Test
    void selectionOffKeepsTheDefaultRouteWhileShadowReportsFaster() throws IOException {
        writeExtent();
        Run run = readOnceAfterInjecting(ReadPath.AUTO, SelectionConfig.off());
        assertThat(run.servedBy()).isEqualTo(ReadPath.URING);
        assertThat(run.switched()).isZero();
        assertThat(run.fasterShadows()).isEqualTo(1); // the evidence was there; only selection acts on it
    }

    @Test
    void aForcedRouteIsNeverSwitched() throws IOException {
        writeExtent();
        Run run = readOnceAfterInjecting(ReadPath.URING, SelectionConfig.crossMedium());
        assertThat(run.servedBy()).isEqualTo(ReadPath.URING);
        assertThat(run.switched()).isZero();
    }

    @Test
    void withinTheMarginSelectionKeepsTheDefault() throws IOException {
        writeExtent();
        CostObserver observer = CostObserver.create(CostConfig.defaults(true), SelectionConfig.sameMedium(),
                new SimpleMeterRegistry(), new AtomicLong()::get);
        try (SsdStore s = SsdStore.open(config(ReadPath.AUTO), new ResidencyStream(4096), new SimpleMeterRegistry(), observer)) {
            s.recover();
            try (Pin pin = (Pin) s.pin(key(0), SsdTestSupport.NS)) {
                inject(observer, s.costKey(ReadPath.URING, pin), 1_000_000, 4);
                inject(observer, s.costKey(ReadPath.POSITIONAL, pin), 970_000, 4); // 3 % faster: noise
                s.read(pin, SsdTestSupport.SHARED.allocate(pin.paddedPayloadBytes(), 4096)).join();
            }
        }
        assertThat(observer.selectionSwitched()).isZero();
        assertThat(observer.selectionKept()).containsEntry(Selection.KeepReason.WITHIN_MARGIN, 1L);
    }
}
