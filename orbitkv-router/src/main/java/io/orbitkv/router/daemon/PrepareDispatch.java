package io.orbitkv.router.daemon;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The router's remote prepares (docs/routing.md "Preparing the chosen worker"): after a route, the
 * request's pages go to the chosen worker's Manager with the worker's estimated queue wait as
 * first use, so SSD and peer pages are staged while the request queues.
 *
 * <p>Thread model: thread-safe; {@link #send} is called from HTTP handler threads, never blocks
 * and never throws: at most {@value #MAX_IN_FLIGHT} calls are outstanding (one more is dropped and
 * counted), every answer and failure is counted in {@code orbitkv_router_prepares_total{outcome}}.
 */
final class PrepareDispatch implements AutoCloseable {

    /** Remote prepares sent and not yet answered, at most. */
    static final int MAX_IN_FLIGHT = 256;

    /** The outcomes counted: the Manager's answers, then the router's own. */
    static final List<String> OUTCOMES = List.of("accepted", "trimmed", "refused", "not_registered", "busy",
            "failed", "dropped", "no_namespace");

    private final PrepareTransport transport;
    private final Semaphore inFlight = new Semaphore(MAX_IN_FLIGHT);
    private final Map<String, AtomicLong> counts = new ConcurrentHashMap<>();

    PrepareDispatch(PrepareTransport transport, MeterRegistry registry) {
        this.transport = transport;
        for (String o : OUTCOMES) {
            AtomicLong n = new AtomicLong();
            counts.put(o, n);
            FunctionCounter.builder("orbitkv_router_prepares", n, AtomicLong::get).tags(Tags.of("outcome", o))
                    .description("remote prepares sent to chosen workers' Managers, by outcome").register(registry);
        }
    }

    /** Sends {@code demand} to {@code endpoint}, or counts why not. */
    void send(String endpoint, PrepareTransport.Demand demand) {
        if (!inFlight.tryAcquire()) {
            count("dropped");
            return;
        }
        try {
            transport.prepare(endpoint, demand).whenComplete((outcome, failure) -> {
                inFlight.release();
                count(failure != null || !counts.containsKey(outcome) ? "failed" : outcome);
            });
        } catch (RuntimeException e) {
            inFlight.release();
            count("failed");
        }
    }

    void count(String outcome) {
        counts.get(outcome).incrementAndGet();
    }

    /** Calls outstanding now. */
    int inFlight() {
        return MAX_IN_FLIGHT - inFlight.availablePermits();
    }

    @Override
    public void close() {
        transport.close();
    }
}
