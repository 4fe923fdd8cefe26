package io.orbitkv.core.engine;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.core.query.OperationHost;

import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

/**
 * The Manager logic's meters ({@code orbitkv.manager.*}) and the table sizes behind its gauges.
 *
 * <p>Thread-safe: counters are Micrometer's, table sizes are atomics that sessions adjust under
 * their own locks. Invariant: each table gauge equals the sum over open and draining sessions.
 */
final class ManagerMetrics implements AutoCloseable {

    /** The bounded tables whose refusals are counted ({@code orbitkv.manager.busy}, tag {@code table}). */
    enum Table { CONNECTIONS, INSTANCES, NAMESPACES, OPERATIONS, LEASES, RESERVATIONS, REGIONS, RESTORES }

    final AtomicLong operations = new AtomicLong();
    final AtomicLong reservations = new AtomicLong();
    final AtomicLong regions = new AtomicLong();

    private final MeterRegistry registry;
    private final List<Meter> meters = new ArrayList<>();
    private final Map<OperationHost.QueryOutcome, Counter> queries = new EnumMap<>(OperationHost.QueryOutcome.class);
    private final Map<Table, Counter> busy = new EnumMap<>(Table.class);
    private final Map<OperationHost.PeerWaitOutcome, Counter> peerWaits = new EnumMap<>(OperationHost.PeerWaitOutcome.class);
    private final Counter pagesLeased;
    private final Counter restoreBytes;
    /** Same-epoch REGISTERs that waited for the previous connection's close (protocol §9.2). */
    final Counter reconnectWaits;

    ManagerMetrics(MeterRegistry registry, Supplier<Number> sessions, Supplier<Number> leases,
                   Supplier<Number> stagingBytes) {
        this.registry = registry;
        for (OperationHost.QueryOutcome o : OperationHost.QueryOutcome.values()) {
            queries.put(o, add(Counter.builder("orbitkv.manager.queries").tag("outcome", lower(o))
                    .description("query answers by outcome (pending: first answers)").register(registry)));
        }
        for (Table t : Table.values()) {
            busy.put(t, add(Counter.builder("orbitkv.manager.busy").tag("table", lower(t))
                    .description("BUSY refusals by bounded table").register(registry)));
        }
        for (OperationHost.PeerWaitOutcome o : OperationHost.PeerWaitOutcome.values()) {
            peerWaits.put(o, add(Counter.builder("orbitkv.manager.peer.waits").tag("outcome", lower(o))
                    .description("QUERYs that waited for peers, by how the wait ended").register(registry)));
        }
        pagesLeased = add(Counter.builder("orbitkv.manager.pages.leased").description("pages leased by hits")
                .register(registry));
        restoreBytes = add(Counter.builder("orbitkv.manager.restore.bytes").baseUnit("bytes")
                .description("bytes copied into engine regions").register(registry));
        reconnectWaits = add(Counter.builder("orbitkv.manager.register.reconnect.waits")
                .description("same-epoch REGISTERs that waited for the previous connection's close").register(registry));
        gauge("orbitkv.manager.sessions", "open engine connections", sessions);
        gauge("orbitkv.manager.operations", "live or draining query operations", operations::get);
        gauge("orbitkv.manager.leases", "global lease table entries in use", leases);
        gauge("orbitkv.manager.reservations", "open publish reservations", reservations::get);
        gauge("orbitkv.manager.regions", "registered destination regions", regions::get);
        gauge("orbitkv.manager.staging.bytes", "bytes being staged from SSD for queries", stagingBytes);
    }

    /** Gauges of the publish quarantine (protocol §9.6): slot bytes and slots held, early releases. */
    void quarantine(Supplier<Number> heldBytes, Supplier<Number> heldSlots, Supplier<Number> releasedEarly) {
        gauge("orbitkv.manager.publish.quarantine.bytes", "slot bytes of closed sessions' unsealed reservations held",
                heldBytes);
        gauge("orbitkv.manager.publish.quarantine.slots", "slots of closed sessions' unsealed reservations held",
                heldSlots);
        gauge("orbitkv.manager.publish.quarantine.released.early",
                "quarantined slots freed before their grace ended because the byte budget was full", releasedEarly);
    }

    void query(OperationHost.QueryOutcome outcome, int pages) {
        queries.get(outcome).increment();
        if (pages > 0) pagesLeased.increment(pages);
    }

    void peerWait(OperationHost.PeerWaitOutcome outcome) {
        peerWaits.get(outcome).increment();
    }

    /** QUERYs that waited for peers and ended {@code outcome} so far. */
    long peerWaits(OperationHost.PeerWaitOutcome outcome) {
        return (long) peerWaits.get(outcome).count();
    }

    void busy(Table table) {
        busy.get(table).increment();
    }

    void restoreBytes(long bytes) {
        if (bytes > 0) restoreBytes.increment(bytes);
    }

    long queries(OperationHost.QueryOutcome outcome) {
        return (long) queries.get(outcome).count();
    }

    long busyTotal() {
        long n = 0;
        for (Counter c : busy.values()) n += (long) c.count();
        return n;
    }

    long pagesLeased() {
        return (long) pagesLeased.count();
    }

    long restoreBytes() {
        return (long) restoreBytes.count();
    }

    private void gauge(String name, String description, Supplier<Number> value) {
        add(Gauge.builder(name, value).description(description).register(registry));
    }

    private <M extends Meter> M add(M meter) {
        meters.add(meter);
        return meter;
    }

    private static String lower(Enum<?> e) {
        return e.name().toLowerCase(Locale.ROOT);
    }

    @Override
    public void close() {
        for (Meter m : meters) registry.remove(m);
    }
}
