package io.orbitkv.core.storage.publish;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.binder.BaseUnits;
import io.orbitkv.core.namespace.TenantQuota;
import io.orbitkv.core.namespace.TenantTable;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.core.storage.ssd.ExtentLayout;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The SSD side of tenant quotas: the extent bytes each configured tenant holds on SSD (indexed
 * extents plus the writes admitted for it and not yet finished), and the admission rule: a write
 * that would take its tenant past its {@code ssdBytes} cap is not admitted (the page stays in DRAM
 * only, counted as skip reason {@code tenant_quota}).
 *
 * <p>Fed by the SSD index's changes ({@link #onSsd}: the same points that feed the retention
 * ledger) and by the pipeline's pending writes ({@link #admit}, {@link #finished}). An extent is
 * charged to the tenant whose write was pending for its key when it was indexed; an extent no such
 * write names (recovered after a restart: labels are not stored on SSD) to its namespace's default
 * tenant.
 *
 * <p>Thread model: thread-safe; one lock guards the maps and the sums, held only for map updates;
 * no call out is made under it.
 *
 * <p>Invariants: {@code indexed[t]} is the sum of the footprints of the indexed extents charged to
 * {@code t}; {@code pending[t]} of the pending writes charged to {@code t}. Bounded: one entry per
 * indexed extent of a tracked tenant (the ring bounds them) and one per pending write (the write
 * lane bounds them). Nothing is kept when no quota names an SSD cap.
 *
 * <p>Design note: the ring overwrites its oldest extents whoever wrote them, so an SSD cap cannot
 * make a tenant evict its own extents to make room; what it can do is stop a tenant at its cap from
 * writing, so it cannot move the write head and overwrite others' extents until the ring, moved by
 * others, has overwritten some of its own.
 */
public final class TenantSsdLedger {

    private record Charge(int tenant, long bytes) {
    }

    /** An indexed extent, by namespace and key: two namespaces' extents of the same key bytes are charged apart. */
    private record Extent(NamespaceDigest namespace, StateKey key) {
    }

    private final TenantTable table;
    private final boolean enabled;
    private final Object lock = new Object();
    // @GuardedBy("lock") below
    private final Map<StateKey, Charge> pendingByKey = new HashMap<>();
    private final Map<Extent, Charge> indexedByExtent = new HashMap<>();
    private final long[] pending;
    private final long[] indexed;
    private final long[] refusals;
    private final List<Meter> meters = new ArrayList<>();

    /** A ledger of the SSD caps of {@code table}'s tenants (enabled only when one names a cap). */
    public TenantSsdLedger(TenantTable table) {
        this.table = table;
        boolean any = false;
        for (int t = 1; t < table.size(); t++) any |= table.ssdBytes(t) != TenantQuota.UNLIMITED;
        this.enabled = any;
        this.pending = new long[table.size()];
        this.indexed = new long[table.size()];
        this.refusals = new long[table.size()];
    }

    /**
     * A write of {@code key} ({@code payloadBytes}) for {@code tenant} asks for admission: true (and
     * the bytes are charged as pending) unless it would take the tenant past its SSD cap.
     */
    boolean admit(StateKey key, int tenant, int payloadBytes) {
        if (!enabled || tenant == TenantTable.UNTRACKED) return true;
        long bytes = ExtentLayout.footprintBytes(payloadBytes);
        synchronized (lock) {
            if (pending[tenant] + indexed[tenant] + bytes > table.ssdBytes(tenant)) {
                refusals[tenant]++;
                return false;
            }
            Charge old = pendingByKey.put(key, new Charge(tenant, bytes));
            if (old != null) pending[old.tenant()] -= old.bytes();
            pending[tenant] += bytes;
            return true;
        }
    }

    /** The pending write of {@code key} ended (any outcome): its pending charge ends. */
    void finished(StateKey key) {
        if (!enabled) return;
        synchronized (lock) {
            Charge c = pendingByKey.remove(key);
            if (c != null) pending[c.tenant()] -= c.bytes();
        }
    }

    /** An extent of {@code key} in {@code namespace} was indexed or dropped. */
    public void onSsd(NamespaceDigest namespace, StateKey key, ResidencyEvent.Kind kind, int payloadBytes) {
        if (!enabled) return;
        synchronized (lock) {
            switch (kind) {
                case ADDED -> {
                    Charge p = pendingByKey.get(key);
                    int tenant = p != null ? p.tenant() : table.resolve(namespace, null);
                    if (tenant == TenantTable.UNTRACKED) return;
                    Charge c = new Charge(tenant, ExtentLayout.footprintBytes(payloadBytes));
                    Charge old = indexedByExtent.put(new Extent(namespace, key), c);
                    if (old != null) indexed[old.tenant()] -= old.bytes();
                    indexed[tenant] += c.bytes();
                }
                case REMOVED -> {
                    Charge c = indexedByExtent.remove(new Extent(namespace, key));
                    if (c != null) indexed[c.tenant()] -= c.bytes();
                }
            }
        }
    }

    /** SSD bytes charged to {@code tenant} (indexed and pending). */
    long bytes(int tenant) {
        synchronized (lock) {
            return indexed[tenant] + pending[tenant];
        }
    }

    private long refusals(int tenant) {
        synchronized (lock) {
            return refusals[tenant];
        }
    }

    /**
     * Gauges {@code orbitkv.tenant.ssd.used} and {@code .limit} (bytes) and counter
     * {@code orbitkv.tenant.ssd.refusals}, one set per configured quota, tagged like the DRAM ones.
     */
    void registerMeters(MeterRegistry registry, Tags arena) {
        for (int t = 1; t < table.size(); t++) {
            int tenant = t;
            TenantQuota q = table.quota(t);
            Tags tags = Tags.of("namespace", q.namespace().toString(), "tenant", q.labelText()).and(arena);
            meters.add(Gauge.builder("orbitkv.tenant.ssd.used", this, l -> l.bytes(tenant)).baseUnit(BaseUnits.BYTES)
                    .tags(tags).description("SSD extent bytes charged to the tenant (indexed and being written)")
                    .register(registry));
            meters.add(Gauge.builder("orbitkv.tenant.ssd.limit", q, x -> x.ssdBytes() == TenantQuota.UNLIMITED ? -1 : x.ssdBytes())
                    .baseUnit(BaseUnits.BYTES).tags(tags).description("the tenant's SSD cap (-1: none)").register(registry));
            meters.add(FunctionCounter.builder("orbitkv.tenant.ssd.refusals", this, l -> l.refusals(tenant)).tags(tags)
                    .description("SSD writes of the tenant its cap did not admit").register(registry));
        }
    }

    /** Removes the meters {@link #registerMeters} registered. */
    void removeMeters(MeterRegistry registry) {
        for (Meter m : meters) registry.remove(m);
        meters.clear();
    }
}
