package io.orbitkv.core.storage.dram;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.binder.BaseUnits;

import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.function.ToLongFunction;

/**
 * The DRAM tier's meters in the registry it was given: byte gauges read from the
 * {@link SlotTable}'s accounting, and counters of what happened. Registered when the tier opens
 * and removed when it closes, so a registry can outlive (and see a reopen of) a tier.
 *
 * <p>Names ({@code orbitkv.dram.}...): gauges {@code bytes.capacity}, {@code bytes.free},
 * {@code bytes.reserved}, {@code bytes.used}, {@code bytes.evicted.leased}, {@code bytes.leased},
 * {@code leases}, {@code images.resident}; counters {@code hits}, {@code misses},
 * {@code inserts}, {@code commits.duplicate}, {@code evictions} (tag {@code cause}),
 * {@code handovers.skipped} (evictions not handed to the eviction listener),
 * {@code reservations.failed} (tag {@code reason}).
 *
 * Every meter carries the tag {@code arena} = the configured arena name, so two tiers can share
 * a registry without one's gauges shadowing the other's.
 *
 * <p>Thread model: {@code hits}, {@code inserts} and {@code evictions} are function counters over
 * counts the {@link SlotTable} keeps under its lock in the transitions they count (pin, publish,
 * retire); the other counters are lock-free and may be bumped from any thread. A gauge or
 * function-counter read takes the slot table's lock once (a scrape reads about twenty, every few
 * seconds). Key, namespace and slot identities never become tags: tag values come from
 * configuration and closed enums only.
 *
 * <p>Design note: the three counters of every put+get+evict were atomic adds on three more cache
 * lines, each a miss once a 256 KiB copy has pushed the tier's state out of the core's caches
 * (the bookkeeping runs between copies: {@code dram-steps} in docs/performance.md), while the slot
 * table's lines are loaded by the transition anyway.
 */
final class DramMetrics implements AutoCloseable {

    /** Why an image left the index. */
    enum EvictionCause {
        /** Caffeine's W-TinyLFU chose it under weight pressure. */
        POLICY,
        /** {@link DramTier#evict} asked for it. */
        EXPLICIT,
        /** Its size class had no free slot; it was that class's coldest unleased image. */
        CLASS_PRESSURE,
        /** {@link DramTier#evictNamespace} dropped its namespace. */
        NAMESPACE,
        /**
         * Never now: images are identified by namespace and key, so a commit of the same key in
         * another namespace adds an image instead of replacing one. The cause stays so that the
         * {@code cause="displaced"} series keeps reading 0 on dashboards that show it.
         */
        DISPLACED,
        /** A HINT DROP of its namespace removed it ({@link DramTier#drop}). */
        DROPPED,
        /** Its tenant was over its DRAM cap and it was the tenant's least recently used unleased image. */
        TENANT_QUOTA;

        String tag() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    private static final System.Logger LOG = System.getLogger(DramMetrics.class.getName());

    private final MeterRegistry registry;
    private final Tags arenaTag;
    private final List<Meter> meters = new ArrayList<>();
    private final Counter misses;
    private final Counter duplicates;
    private final Counter handOversSkipped;
    private final Counter undersized;
    /** Per size class, 1 once the undersized-page warning was logged (one line per class). */
    private final AtomicIntegerArray undersizedWarned;
    private final Map<ReserveResult.FullReason, Counter> reservationFailures =
            new EnumMap<>(ReserveResult.FullReason.class);

    DramMetrics(MeterRegistry registry, String arenaName, SlotTable slots) {
        this.registry = registry;
        this.arenaTag = Tags.of("arena", arenaName);
        bytesGauge("orbitkv.dram.capacity", slots, DramUsage::capacityBytes, "slot bytes of all arenas");
        bytesGauge("orbitkv.dram.free", slots, DramUsage::freeBytes, "slot bytes on free lists");
        bytesGauge("orbitkv.dram.reserved", slots, DramUsage::reservedBytes,
                "slot bytes reserved, not committed");
        bytesGauge("orbitkv.dram.used", slots, DramUsage::usedBytes, "slot bytes of resident images");
        bytesGauge("orbitkv.dram.evicted.leased", slots, DramUsage::evictedLeasedBytes,
                "slot bytes of evicted images still leased");
        bytesGauge("orbitkv.dram.leased", slots, DramUsage::leasedBytes, "slot bytes with at least one lease");
        meters.add(Gauge.builder("orbitkv.dram.leases", slots, s -> s.usage().leases())
                .tags(arenaTag).description("outstanding leases").register(registry));
        meters.add(Gauge.builder("orbitkv.dram.images.resident", slots, s -> s.usage().residentImages())
                .tags(arenaTag).description("images in the index").register(registry));
        slotCounter("orbitkv.dram.hits", Tags.empty(), slots, SlotTable::usePins, "acquires that leased an image");
        this.misses = counter("orbitkv.dram.misses", "acquires that found no resident image");
        slotCounter("orbitkv.dram.inserts", Tags.empty(), slots, SlotTable::publishes,
                "commits that made an image resident");
        this.duplicates = counter("orbitkv.dram.commits.duplicate", "commits of an already resident key");
        this.handOversSkipped = counter("orbitkv.dram.handovers.skipped",
                "evicted images not handed to the eviction listener: evicted-leased budget full, or the last "
                        + "eviction a reservation may make");
        this.undersized = counter("orbitkv.dram.reservations.undersized",
                "reservations of a page that fills less than half its slot (no smaller size class holds it)");
        this.undersizedWarned = new AtomicIntegerArray(slots.classCount());
        for (EvictionCause cause : EvictionCause.values()) {
            slotCounter("orbitkv.dram.evictions", Tags.of("cause", cause.tag()), slots, t -> t.retirements(cause),
                    "images removed from the index");
        }
        for (ReserveResult.FullReason reason : ReserveResult.FullReason.values()) {
            Counter c = Counter.builder("orbitkv.dram.reservations.failed")
                    .tag("reason", reason.name().toLowerCase(Locale.ROOT))
                    .tags(arenaTag).description("reservations refused").register(registry);
            meters.add(c);
            reservationFailures.put(reason, c);
        }
    }

    private void bytesGauge(String name, SlotTable slots, ToLongFunction<DramUsage> field, String description) {
        meters.add(Gauge.builder(name, slots, s -> field.applyAsLong(s.usage()))
                .baseUnit(BaseUnits.BYTES).tags(arenaTag).description(description).register(registry));
    }

    /** A counter the slot table keeps under its lock (hits, inserts, evictions; see {@link SlotTable#usePins}). */
    private void slotCounter(String name, Tags tags, SlotTable slots, ToLongFunction<SlotTable> count,
                             String description) {
        meters.add(FunctionCounter.builder(name, slots, t -> count.applyAsLong(t))
                .tags(tags).tags(arenaTag).description(description).register(registry));
    }

    private Counter counter(String name, String description) {
        Counter c = Counter.builder(name).tags(arenaTag).description(description).register(registry);
        meters.add(c);
        return c;
    }

    /**
     * The per-tenant meters, one set per configured quota (tags {@code namespace} = digest hex,
     * {@code tenant} = label, empty for the namespace's default tenant): gauges
     * {@code orbitkv.tenant.dram.used}, {@code .limit}, {@code .guaranteed} (bytes) and counters
     * {@code orbitkv.tenant.dram.evictions} (by its own cap) and {@code .refusals} (reservations its
     * cap refused). Bounded by the configured quotas; tag values come from configuration only.
     */
    void tenants(SlotTable slots) {
        TenantSlots tenants = slots.tenants();
        io.orbitkv.core.namespace.TenantTable table = tenants.table();
        for (int t = 1; t < table.size(); t++) {
            int tenant = t;
            io.orbitkv.core.namespace.TenantQuota q = table.quota(t);
            Tags tags = Tags.of("namespace", q.namespace().toString(), "tenant", q.labelText()).and(arenaTag);
            meters.add(Gauge.builder("orbitkv.tenant.dram.used", slots, s -> tenants.figures(s, tenant)[0])
                    .baseUnit(BaseUnits.BYTES).tags(tags).description("DRAM slot bytes charged to the tenant")
                    .register(registry));
            meters.add(Gauge.builder("orbitkv.tenant.dram.limit", q, x -> x.dramBytes() == Long.MAX_VALUE ? -1 : x.dramBytes())
                    .baseUnit(BaseUnits.BYTES).tags(tags).description("the tenant's DRAM cap (-1: none)")
                    .register(registry));
            meters.add(Gauge.builder("orbitkv.tenant.dram.guaranteed", q, x -> x.dramGuaranteedBytes())
                    .baseUnit(BaseUnits.BYTES).tags(tags).description("the tenant's DRAM guarantee")
                    .register(registry));
            meters.add(FunctionCounter.builder("orbitkv.tenant.dram.evictions", slots, s -> tenants.figures(s, tenant)[1])
                    .tags(tags).description("images of the tenant evicted by its own cap").register(registry));
            meters.add(FunctionCounter.builder("orbitkv.tenant.dram.refusals", slots, s -> tenants.figures(s, tenant)[2])
                    .tags(tags).description("reservations of the tenant its cap refused (NO_SPACE)").register(registry));
        }
    }

    /**
     * {@code orbitkv.dram.arena.namespaces}: namespaces with arenas now (at most {@code maxArenaNamespaces});
     * a supplier gauge holds {@code namespaces} strongly (an object gauge would let it be collected).
     */
    void arenaNamespaces(java.util.function.IntSupplier namespaces) {
        meters.add(Gauge.builder("orbitkv.dram.arena.namespaces", namespaces::getAsInt)
                .tags(arenaTag).description("namespaces with DRAM arenas (bounded by maxArenaNamespaces)")
                .register(registry));
    }

    void miss() {
        misses.increment();
    }

    void duplicate() {
        duplicates.increment();
    }

    void handOverSkipped() {
        handOversSkipped.increment();
    }

    /**
     * A reservation of {@code lengthBytes} granted a slot of {@code slotBytes} in {@code sizeClass}:
     * a page whose whole 4 KiB blocks fill at most half of it (so a class of its size would hold
     * twice as many or more) is counted, and the first such page of each class is logged (INFO: a
     * sizing hint for the operator, not a fault) with what would fit it. Pages below 4 KiB are not:
     * no class is smaller.
     */
    void reserved(int sizeClass, int slotBytes, int lengthBytes) {
        long blocks = ((long) lengthBytes + DramArenaLayout.PAGE_BYTES - 1) / DramArenaLayout.PAGE_BYTES;
        long needed = blocks * DramArenaLayout.PAGE_BYTES;
        if (needed * 2 > slotBytes) return;
        undersized.increment();
        if (undersizedWarned.compareAndSet(sizeClass, 0, 1)) {
            LOG.log(System.Logger.Level.INFO, String.format("DRAM pages of %d bytes take slots of %d bytes (the "
                    + "smallest dramSlotBytes class that holds them), %d %% of each unused: a dramSlotBytes class of %d "
                    + "bytes would hold %d times as many (counted in orbitkv_dram_reservations_undersized_total)",
                    lengthBytes, slotBytes, 100 - 100L * lengthBytes / slotBytes, needed, slotBytes / needed));
        }
    }

    void reservationFailed(ReserveResult.FullReason reason) {
        reservationFailures.get(reason).increment();
    }

    /** Removes this tier's meters from the registry. */
    @Override
    public void close() {
        for (Meter m : meters) {
            registry.remove(m);
        }
        meters.clear();
    }
}
