package io.orbitkv.core.cost;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;

import java.util.EnumMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.ToDoubleFunction;

/**
 * Prometheus meters of cost observation, registered once when observations are on:
 * <ul>
 *   <li>{@code orbitkv_cost_stage_seconds{path,stage}}: queue, admission, service, total (host clock;
 *       total overlaps the others and is never their sum's substitute)</li>
 *   <li>{@code orbitkv_cost_logical_bytes_total{path}}, {@code orbitkv_cost_io_bytes_total{path}}:
 *       known bytes only</li>
 *   <li>{@code orbitkv_cost_logical_unknown_total{path}}, {@code orbitkv_cost_io_unknown_total{path}}:
 *       operations whose byte count was unknown</li>
 *   <li>{@code orbitkv_cost_operations_total{path,terminal}}: every observed operation by outcome</li>
 *   <li>{@code orbitkv_cost_shadow_total{outcome}}, {@code orbitkv_cost_dropped_total},
 *       {@code orbitkv_cost_entries}</li>
 * </ul>
 * Labels are enum names only: resource, request and state identities never become labels.
 *
 * <p>Thread model: meters are thread-safe; the maps are filled in the constructor and then
 * only read.
 */
final class CostMetrics {

    /** The four exported stages. */
    enum Stage { QUEUE, ADMISSION, SERVICE, TOTAL }

    private final Map<CostPath, Map<Stage, Timer>> stages = new EnumMap<>(CostPath.class);
    private final Map<CostPath, Counter> logicalBytes = new EnumMap<>(CostPath.class);
    private final Map<CostPath, Counter> ioBytes = new EnumMap<>(CostPath.class);
    private final Map<CostPath, Counter> logicalUnknown = new EnumMap<>(CostPath.class);
    private final Map<CostPath, Counter> ioUnknown = new EnumMap<>(CostPath.class);
    private final Map<CostPath, Map<Terminal, Counter>> operations = new EnumMap<>(CostPath.class);
    private final Map<ShadowOutcome, Counter> shadow = new EnumMap<>(ShadowOutcome.class);
    private final Map<BoundaryChoice.Basis, Counter> boundary = new EnumMap<>(BoundaryChoice.Basis.class);

    <T> CostMetrics(MeterRegistry registry, T owner, ToDoubleFunction<T> entries, ToDoubleFunction<T> dropped) {
        for (CostPath p : CostPath.values()) {
            String path = lower(p);
            Map<Stage, Timer> byStage = new EnumMap<>(Stage.class);
            for (Stage s : Stage.values()) {
                byStage.put(s, Timer.builder("orbitkv.cost.stage").tag("path", path).tag("stage", lower(s))
                        .description("host-clock time of one stage of an observed operation").register(registry));
            }
            stages.put(p, byStage);
            logicalBytes.put(p, Counter.builder("orbitkv.cost.logical.bytes").tag("path", path)
                    .description("known logical (unpadded state) bytes attempted").register(registry));
            ioBytes.put(p, Counter.builder("orbitkv.cost.io.bytes").tag("path", path)
                    .description("known physical bytes moved by the owner").register(registry));
            logicalUnknown.put(p, Counter.builder("orbitkv.cost.logical.unknown").tag("path", path)
                    .description("operations whose logical byte count was unknown").register(registry));
            ioUnknown.put(p, Counter.builder("orbitkv.cost.io.unknown").tag("path", path)
                    .description("operations whose physical byte count was unknown").register(registry));
            Map<Terminal, Counter> byTerminal = new EnumMap<>(Terminal.class);
            for (Terminal t : Terminal.values()) {
                byTerminal.put(t, Counter.builder("orbitkv.cost.operations").tag("path", path).tag("terminal", lower(t))
                        .description("observed operations by terminal outcome").register(registry));
            }
            operations.put(p, byTerminal);
        }
        for (ShadowOutcome o : ShadowOutcome.values()) {
            shadow.put(o, Counter.builder("orbitkv.cost.shadow").tag("outcome", lower(o))
                    .description("shadow comparisons by outcome").register(registry));
        }
        for (BoundaryChoice.Basis b : BoundaryChoice.Basis.values()) {
            boundary.put(b, Counter.builder("orbitkv.cost.boundary").tag("basis", lower(b))
                    .description("boundary choices of queries that needed staging, by basis").register(registry));
        }
        Gauge.builder("orbitkv.cost.entries", owner, entries).description("estimate entries held").register(registry);
        Gauge.builder("orbitkv.cost.dropped", owner, dropped)
                .description("estimator updates dropped on contention").register(registry);
    }

    private static String lower(Enum<?> e) {
        return e.name().toLowerCase(Locale.ROOT);
    }

    void boundary(BoundaryChoice.Basis basis) {
        boundary.get(basis).increment();
    }

    void stages(CostPath path, Timeline t) {
        Map<Stage, Timer> m = stages.get(path);
        m.get(Stage.QUEUE).record(t.queueNanos(), TimeUnit.NANOSECONDS);
        m.get(Stage.ADMISSION).record(t.admissionNanos(), TimeUnit.NANOSECONDS);
        m.get(Stage.SERVICE).record(t.serviceNanos(), TimeUnit.NANOSECONDS);
        m.get(Stage.TOTAL).record(t.totalNanos(), TimeUnit.NANOSECONDS);
    }

    void bytes(CostPath path, ByteCount logical, ByteCount io) {
        switch (logical) {
            case ByteCount.Known(long b) -> logicalBytes.get(path).increment(b);
            case ByteCount.Unknown() -> logicalUnknown.get(path).increment();
        }
        switch (io) {
            case ByteCount.Known(long b) -> ioBytes.get(path).increment(b);
            case ByteCount.Unknown() -> ioUnknown.get(path).increment();
        }
    }

    void operation(CostPath path, Terminal terminal) {
        operations.get(path).get(terminal).increment();
    }

    void shadow(ShadowOutcome outcome) {
        shadow.get(outcome).increment();
    }
}
