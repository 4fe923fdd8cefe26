package io.orbitkv.core.cost;

import io.orbitkv.state.protocol.CompletionTarget;


/** Keys used by the cost tests. */
final class CostKeys {

    static final ResourceId STORE = new ResourceId("ssd:/tmp/store", 1);

    private CostKeys() {}

    static CostKey route(CostPath path, long bytes) {
        return new CostKey(path, SampleKind.ROUTE, STORE, RepresentationFamily.RAW, CompletionTarget.HOST_READY,
                Shape.of(bytes, 1));
    }

    static Observation ok(CostKey routeKey, long queueNanos, long serviceNanos) {
        return observation(routeKey, Terminal.SUCCEEDED, queueNanos, serviceNanos);
    }

    static Observation observation(CostKey routeKey, Terminal terminal, long queueNanos, long serviceNanos) {
        long t0 = 1_000;
        return new Observation(routeKey, terminal, new Timeline(t0, t0 + queueNanos, t0 + queueNanos,
                t0 + queueNanos + serviceNanos), ByteCount.known(4096), ByteCount.known(8192));
    }
}
