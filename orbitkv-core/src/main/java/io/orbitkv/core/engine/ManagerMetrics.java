package io.orbitkv.core.engine;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.orbitkv.core.log.UnexpectedErrors;
import io.orbitkv.core.query.PrepareAccounting;
import io.orbitkv.core.query.QueryMetrics;
import io.orbitkv.core.query.Speculation;

import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Supplier;
import java.util.function.ToDoubleFunction;

/**
 * The Manager logic's meters ({@code orbitkv_manager_*}, {@code orbitkv_prefix_cache_*},
 * {@code orbitkv_query_*}, {@code orbitkv_restore_*}) and the table sizes behind its gauges.
 * docs/operations.md lists every series.
 *
 * <p>Thread-safe: counters are Micrometer's, table sizes are atomics that sessions adjust under
 * their own locks. Invariant: each table gauge equals the sum over open and draining sessions;
 * the per-tier hit tokens of a query add up to its hit tokens.
 *
 * <p>Design note: every label set is fixed at construction (3 tiers, 2 or 3 outcomes, 8
 * tables), so a scrape is the same size whatever the workload, and series exist (at 0) before
 * the first query, which lets {@code rate()} and the dashboard answer on an idle Manager.
 * Prefix-cache tokens follow the engines' own counters (vLLM's {@code prefix_cache_queries} /
 * {@code prefix_cache_hits}: tokens asked about, tokens served from the cache), so hit ratios
 * compare across the engine and the Manager. Latency buckets are explicit (16, 100 µs to 10 s):
 * the first bucket separates DRAM hits answered at once from stagings (the operator-views test
 * measured a 0.9-12 ms p50 for hits, peer hits included), the last covers the 5 s peer-wait bound.
 */
final class ManagerMetrics implements QueryMetrics, AutoCloseable {

    /** The bounded tables whose refusals are counted ({@code orbitkv_manager_busy_total}, label {@code table}). */
    enum Table { CONNECTIONS, INSTANCES, NAMESPACES, ARENA_NAMESPACES, OPERATIONS, LEASES, RESERVATIONS, REGIONS, RESTORES }

    final AtomicLong operations = new AtomicLong();
    final AtomicLong reservations = new AtomicLong();
    final AtomicLong regions = new AtomicLong();

    private final MeterRegistry registry;
    private final List<Meter> meters = java.util.Collections.synchronizedList(new ArrayList<>());
    private final Map<QueryOutcome, Counter> queries = new EnumMap<>(QueryOutcome.class);
    private final Map<Table, Counter> busy = new EnumMap<>(Table.class);
    private final Map<PeerWaitOutcome, Counter> peerWaits = new EnumMap<>(PeerWaitOutcome.class);
    private final Counter pagesLeased;
    private final Counter queriedTokens;
    private final Map<Tier, Counter> hitTokens = new EnumMap<>(Tier.class);
    private final Map<Tier, Counter> hitBytes = new EnumMap<>(Tier.class);
    private final Map<Tier, Counter> restoredBytes = new EnumMap<>(Tier.class);
    private final Map<Boolean, Timer> queryLatency = new HashMap<>(2);
    private final Map<RestoreOutcome, Timer> restoreLatency = new EnumMap<>(RestoreOutcome.class);
    private final Map<QueryMetrics.PeerWaitPhase, Timer> peerWaitPhases = new EnumMap<>(QueryMetrics.PeerWaitPhase.class);
    /** Exact running token totals for /status (Micrometer counters are doubles); hit tokens by tier ordinal. */
    private final LongAdder queriedTotal = new LongAdder();
    private final LongAdder[] tokenTotals = {new LongAdder(), new LongAdder(), new LongAdder()};
    /** Same-epoch REGISTERs that waited for the previous connection's close (protocol §9.2). */
    final Counter reconnectWaits;

    /** Upper bounds of the QUERY and RESTORE latency histogram buckets. */
    static final Duration[] LATENCY_BUCKETS = {
        Duration.ofNanos(100_000), Duration.ofNanos(250_000), Duration.ofNanos(500_000), Duration.ofMillis(1),
        Duration.ofNanos(2_500_000), Duration.ofMillis(5), Duration.ofMillis(10), Duration.ofMillis(25),
        Duration.ofMillis(50), Duration.ofMillis(100), Duration.ofMillis(250), Duration.ofMillis(500),
        Duration.ofSeconds(1), Duration.ofMillis(2_500), Duration.ofSeconds(5), Duration.ofSeconds(10)};

    ManagerMetrics(MeterRegistry registry, Supplier<Number> sessions, Supplier<Number> leases,
                   Supplier<Number> stagingBytes, Supplier<Number> leaseCapacity, Supplier<Number> stagingBudgetBytes) {
        this.registry = registry;
        for (QueryOutcome o : QueryOutcome.values()) {
            queries.put(o, add(Counter.builder("orbitkv.manager.queries").tag("outcome", lower(o))
                    .description("query answers by outcome (pending: first answers)").register(registry)));
        }
        for (Table t : Table.values()) {
            busy.put(t, add(Counter.builder("orbitkv.manager.busy").tag("table", lower(t))
                    .description("BUSY refusals by bounded table").register(registry)));
        }
        for (PeerWaitOutcome o : PeerWaitOutcome.values()) {
            peerWaits.put(o, add(Counter.builder("orbitkv.manager.peer.waits").tag("outcome", lower(o))
                    .description("QUERYs that waited for peers, by how the wait ended").register(registry)));
        }
        pagesLeased = add(Counter.builder("orbitkv.manager.pages.leased").description("pages leased by hits")
                .register(registry));
        queriedTokens = add(Counter.builder("orbitkv.prefix.cache.queried.tokens").baseUnit("tokens")
                .description("prompt tokens settled queries asked about (prompt - origin), as engines count prefix-cache queries")
                .register(registry));
        for (Tier t : Tier.values()) {
            hitTokens.put(t, add(Counter.builder("orbitkv.prefix.cache.hit.tokens").baseUnit("tokens").tag("tier", lower(t))
                    .description("tokens of settled hits (boundary - origin), by the tier their pages came from")
                    .register(registry)));
            hitBytes.put(t, add(Counter.builder("orbitkv.prefix.cache.hit.bytes").baseUnit("bytes").tag("tier", lower(t))
                    .description("payload bytes of pages leased by settled hits, by the tier each page came from")
                    .register(registry)));
            restoredBytes.put(t, add(Counter.builder("orbitkv.restore.bytes").baseUnit("bytes").tag("tier", lower(t))
                    .description("bytes RESTORE copied into engine regions, by the tier each page came from")
                    .register(registry)));
        }
        for (boolean hit : new boolean[] {true, false}) {
            queryLatency.put(hit, add(Timer.builder("orbitkv.query.duration").tag("outcome", hit ? "hit" : "miss")
                    .description("QUERY arrival to FINAL answer (PENDING waits included)")
                    .serviceLevelObjectives(LATENCY_BUCKETS).register(registry)));
        }
        for (RestoreOutcome o : RestoreOutcome.values()) {
            restoreLatency.put(o, add(Timer.builder("orbitkv.restore.duration").tag("outcome", lower(o))
                    .description("RESTORE accepted to its last copy task's end (RESTORE_DONE)")
                    .serviceLevelObjectives(LATENCY_BUCKETS).register(registry)));
        }
        for (QueryMetrics.PeerWaitPhase p : QueryMetrics.PeerWaitPhase.values()) {
            peerWaitPhases.put(p, add(Timer.builder("orbitkv.manager.peer.wait.phase").tag("phase", lower(p))
                    .description("phases of settled peer waits: discovery (arrival to the catalog's answer), fetch (to settled)")
                    .serviceLevelObjectives(LATENCY_BUCKETS).register(registry)));
        }
        for (UnexpectedErrors.Layer l : UnexpectedErrors.Layer.values()) {
            add(FunctionCounter.builder("orbitkv.unexpected.errors", l, UnexpectedErrors::count).tag("layer", l.label())
                    .description("unexpected failures (bugs) turned into a miss or a refusal at a layer's error boundary;"
                            + " each also logged at ERROR, rate-limited").register(registry));
        }
        reconnectWaits = add(Counter.builder("orbitkv.manager.register.reconnect.waits")
                .description("same-epoch REGISTERs that waited for the previous connection's close").register(registry));
        gauge("orbitkv.manager.sessions", "open engine connections", sessions);
        gauge("orbitkv.manager.operations", "live or draining query operations", operations::get);
        gauge("orbitkv.manager.leases", "global lease table entries in use", leases);
        gauge("orbitkv.manager.leases.capacity", "global lease table entries (maxLeases)", leaseCapacity);
        gauge("orbitkv.manager.reservations", "open publish reservations", reservations::get);
        gauge("orbitkv.manager.regions", "registered destination regions", regions::get);
        gauge("orbitkv.manager.staging.bytes", "bytes being staged from SSD or peers for queries", stagingBytes);
        gauge("orbitkv.manager.staging.budget.bytes", "the staging budget (stagingBytes)", stagingBudgetBytes);
    }

    /** Gauges of the publish quarantine (protocol §9.6): slot bytes and slots held, early releases. */
    <T> void quarantine(Supplier<Number> heldBytes, Supplier<Number> heldSlots, T owner, ToDoubleFunction<T> releasedEarly) {
        gauge("orbitkv.manager.publish.quarantine.bytes", "slot bytes of closed sessions' unsealed reservations held",
                heldBytes);
        gauge("orbitkv.manager.publish.quarantine.slots", "slots of closed sessions' unsealed reservations held",
                heldSlots);
        add(FunctionCounter.builder("orbitkv.manager.publish.quarantine.released.early", owner, releasedEarly)
                .description("quarantined slots freed before their grace ended because the byte budget was full")
                .register(registry));
    }

    @Override
    public void countPending() {
        queries.get(QueryOutcome.PENDING).increment();
    }

    @Override
    public void countSettled(SettledQuery q) {
        queries.get(q.hit() ? QueryOutcome.HIT : QueryOutcome.MISS).increment();
        long pages = q.pages().total();
        if (pages > 0) pagesLeased.increment(pages);
        if (q.queriedTokens() > 0) queriedTokens.increment(q.queriedTokens());
        TierCounts tokens = q.pages().split(q.hitTokens());
        for (Tier t : Tier.values()) {
            if (tokens.get(t) > 0) hitTokens.get(t).increment(tokens.get(t));
            if (q.bytes().get(t) > 0) hitBytes.get(t).increment(q.bytes().get(t));
            tokenTotals[t.ordinal()].add(tokens.get(t));
        }
        queriedTotal.add(q.queriedTokens());
        queryLatency.get(q.hit()).record(q.durationNanos(), TimeUnit.NANOSECONDS);
    }

    @Override
    public void countRestore(RestoreOutcome outcome, TierCounts bytes, long durationNanos) {
        for (Tier t : Tier.values()) if (bytes.get(t) > 0) restoredBytes.get(t).increment(bytes.get(t));
        restoreLatency.get(outcome).record(durationNanos, TimeUnit.NANOSECONDS);
    }

    /** The prefix-cache totals for /status. */
    ManagerStatus.PrefixCache prefixCache() {
        return new ManagerStatus.PrefixCache(queriedTotal.sum(),
                new TierCounts(tokenTotals[0].sum(), tokenTotals[1].sum(), tokenTotals[2].sum()),
                counts(hitBytes), counts(restoredBytes));
    }

    private static TierCounts counts(Map<Tier, Counter> byTier) {
        return new TierCounts((long) byTier.get(Tier.DRAM).count(), (long) byTier.get(Tier.SSD).count(),
                (long) byTier.get(Tier.PEER).count());
    }

    @Override
    public void countPeerWait(PeerWaitOutcome outcome) {
        peerWaits.get(outcome).increment();
    }

    @Override
    public void timePeerWaitPhase(QueryMetrics.PeerWaitPhase phase, long durationNanos) {
        peerWaitPhases.get(phase).record(durationNanos, TimeUnit.NANOSECONDS);
    }

    /** QUERYs that waited for peers and ended {@code outcome} so far. */
    long peerWaits(PeerWaitOutcome outcome) {
        return (long) peerWaits.get(outcome).count();
    }

    void busy(Table table) {
        busy.get(table).increment();
    }

    long queries(QueryOutcome outcome) {
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
        return counts(restoredBytes).total();
    }

    /**
     * PREPARE's meters: the speculation budget (in flight and held, used and capacity), live
     * prepares, held pages, prepare-table refusals, and per namespace ({@code namespace} label: the
     * DRAM namespace id, {@code -1} past {@link PrepareAccounting#MAX_ROWS}) the pages prepared by
     * {@code route} ({@code ssd}, {@code peer}), released by {@code outcome} ({@code consumed},
     * {@code unused}, {@code expired}) and the byte-seconds held. A namespace's series appear with
     * its first prepare; at most {@code MAX_ROWS + 1} namespaces.
     */
    void speculation(Speculation s) {
        gauge("orbitkv.manager.speculation.inflight.bytes", "bytes prepares admitted and not yet landed",
                () -> s.inFlight().used());
        gauge("orbitkv.manager.speculation.held.bytes", "bytes prepares hold or will hold once landed",
                () -> s.held().used());
        gauge("orbitkv.manager.speculation.inflight.budget.bytes", "the in-flight speculation budget",
                () -> s.inFlight().capacity());
        gauge("orbitkv.manager.speculation.held.budget.bytes", "the held speculation budget", () -> s.held().capacity());
        gauge("orbitkv.manager.prepares", "live prepare operations, over all sessions", s::prepares);
        gauge("orbitkv.manager.prepared.pages.held", "pages held for prepares now", s::heldPages);
        add(FunctionCounter.builder("orbitkv.manager.prepares.busy", s, Speculation::busyRefusals)
                .description("prepares refused because the prepare table was full").register(registry));
        s.accounting().onNewRow(this::prepareRow);
    }

    private void prepareRow(PrepareAccounting.Row row) {
        String ns = Integer.toString(PrepareAccounting.namespaceId(row));
        String prepared = "orbitkv.prepare.pages.prepared";
        add(FunctionCounter.builder(prepared, row, PrepareAccounting::preparedSsd).tags("namespace", ns, "route", "ssd")
                .description("pages staged and held for prepares, by the route they came from").register(registry));
        add(FunctionCounter.builder(prepared, row, PrepareAccounting::preparedPeer).tags("namespace", ns, "route", "peer")
                .description("pages staged and held for prepares, by the route they came from").register(registry));
        String released = "orbitkv.prepare.pages.released";
        String what = "prepared pages let go: consumed by a QUERY, released unused (cancel, disconnect), expired";
        add(FunctionCounter.builder(released, row, PrepareAccounting::consumed).tags("namespace", ns, "outcome", "consumed")
                .description(what).register(registry));
        add(FunctionCounter.builder(released, row, PrepareAccounting::unused).tags("namespace", ns, "outcome", "unused")
                .description(what).register(registry));
        add(FunctionCounter.builder(released, row, PrepareAccounting::expired).tags("namespace", ns, "outcome", "expired")
                .description(what).register(registry));
        add(FunctionCounter.builder("orbitkv.prepare.held.byte.seconds", row, PrepareAccounting::byteSeconds)
                .tags("namespace", ns).description("byte-seconds prepared pages were held until let go").register(registry));
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
        synchronized (meters) {
            for (Meter m : meters) registry.remove(m);
        }
    }
}
