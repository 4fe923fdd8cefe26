package io.orbitkv.core.storage.dram;

import io.orbitkv.core.namespace.TenantTable;

import java.util.Arrays;
import java.util.Optional;

/**
 * The DRAM side of tenant quotas: which tenant each reserved or resident slot is charged to, the
 * slot bytes each tenant holds, and each tenant's own recency list, least recently used at the
 * tail. The {@link SlotTable} calls it inside its transitions (reserve, abort, publish, use,
 * retire), so the bytes always equal the slots charged.
 *
 * <p>What it decides: whether a reservation fits its tenant's cap ({@link #fits}); which of the
 * tenant's own images to evict when it does not ({@link #victimLocked}: the least recently used
 * unleased one); and which images global eviction must pass over ({@link #guardedLocked}: those
 * whose removal would take their tenant below its guarantee).
 *
 * <p>Thread model: guarded by the {@link SlotTable}'s lock, like the policies: the transition hooks
 * and the {@code ...Locked} methods run under it; {@link #victim}, {@link #refused(SlotTable, int)},
 * {@link #figures} and {@link #tenantOf(SlotTable, int)} take it through {@link SlotTable#locked}.
 * It calls nothing else.
 *
 * <p>Invariants: {@code bytes[t]} is the sum of the slot bytes of the RESERVED and RESIDENT slots
 * charged to {@code t}, {@code resident[t]} of the RESIDENT ones (a guarantee protects resident
 * images only, so an open reservation never makes a tenant's resident pages look spare); a slot is on tenant {@code t}'s list iff it is RESIDENT and charged to
 * {@code t != UNTRACKED}. Untracked slots are charged to nobody and on no list.
 *
 * <p>Design note: an exact list per tenant rather than a scan of the global order for the tenant's
 * slots: a quiet tenant's pages deep in a global list would make a bounded scan miss them and a
 * tenant over its cap would be refused while it holds evictable pages. 12 B per slot (the charge
 * and two links), allocated only when a quota is configured; none otherwise.
 */
final class TenantSlots {

    /** No tenant quotas: every slot is untracked and nothing is allocated. */
    static final TenantSlots NONE = new TenantSlots(TenantTable.none(), 0);

    private static final int NONE_SLOT = -1;

    private final TenantTable table;
    private final boolean enabled;
    private final long[] cap;
    private final long[] guaranteed;
    // @GuardedBy("SlotTable.lock") below
    private final int[] slotTenant;
    private final int[] prev;
    private final int[] next;
    private final int[] head;
    private final int[] tail;
    private final long[] bytes;
    /** Slot bytes of the tenant's RESIDENT images only: what its guarantee protects. */
    private final long[] resident;
    private final long[] selfEvictions;
    private final long[] refusals;

    TenantSlots(TenantTable table, int slotCount) {
        this.table = table;
        this.enabled = table.tracksAny() && slotCount > 0;
        int tenants = enabled ? table.size() : 0;
        int slots = enabled ? slotCount : 0;
        this.cap = new long[tenants];
        this.guaranteed = new long[tenants];
        for (int t = 1; t < tenants; t++) {
            cap[t] = table.dramBytes(t);
            guaranteed[t] = table.dramGuaranteedBytes(t);
        }
        this.slotTenant = new int[slots];
        this.prev = new int[slots];
        this.next = new int[slots];
        Arrays.fill(prev, NONE_SLOT);
        Arrays.fill(next, NONE_SLOT);
        this.head = new int[tenants];
        this.tail = new int[tenants];
        Arrays.fill(head, NONE_SLOT);
        Arrays.fill(tail, NONE_SLOT);
        this.bytes = new long[tenants];
        this.resident = new long[tenants];
        this.selfEvictions = new long[tenants];
        this.refusals = new long[tenants];
    }

    TenantTable table() {
        return table;
    }

    /** True when {@code slotBytes} more fit {@code tenant}'s cap. */
    boolean fits(int tenant, int slotBytes) {
        return !enabled || tenant == TenantTable.UNTRACKED || bytes[tenant] + slotBytes <= cap[tenant];
    }

    /** A reservation of {@code tenant} was refused for its cap. */
    void refused(int tenant) {
        if (enabled && tenant != TenantTable.UNTRACKED) refusals[tenant]++;
    }

    /** FREE to RESERVED: {@code slot} is charged to {@code tenant} (in place of its last tenant). */
    void charge(int slot, int tenant, int slotBytes) {
        if (!enabled) return;
        slotTenant[slot] = tenant;
        if (tenant != TenantTable.UNTRACKED) bytes[tenant] += slotBytes;
    }

    /** RESERVED to RESIDENT: {@code slot}'s image counts towards its tenant's guarantee and is its most recent. */
    void published(int slot, int slotBytes) {
        if (!enabled) return;
        int t = slotTenant[slot];
        if (t == TenantTable.UNTRACKED) return;
        resident[t] += slotBytes;
        touched(slot);
    }

    /**
     * RESERVED to FREE, or RESIDENT leaves the index ({@code wasResident}): the charge ends
     * ({@code own}: the tenant's cap evicted it). Called once per charge (the slot table's states guarantee it); the slot keeps
     * naming its tenant until its next charge, so an evicted image handed to the SSD writer is
     * still known as the tenant's ({@link #tenantOf}).
     */
    void discharge(int slot, int slotBytes, boolean wasResident, boolean own) {
        if (!enabled) return;
        int t = slotTenant[slot];
        if (t == TenantTable.UNTRACKED) return;
        unlink(t, slot);
        bytes[t] -= slotBytes;
        if (wasResident) resident[t] -= slotBytes;
        if (own) selfEvictions[t]++;
    }

    /** The tenant {@code slot} was last charged to. */
    int tenantOf(int slot) {
        return enabled ? slotTenant[slot] : TenantTable.UNTRACKED;
    }

    /** A use of a RESIDENT image: {@code slot} becomes its tenant's most recent. */
    void touched(int slot) {
        if (!enabled) return;
        int t = slotTenant[slot];
        if (t == TenantTable.UNTRACKED) return;
        unlink(t, slot);
        prev[slot] = NONE_SLOT;
        next[slot] = head[t];
        if (head[t] != NONE_SLOT) prev[head[t]] = slot;
        head[t] = slot;
        if (tail[t] == NONE_SLOT) tail[t] = slot;
    }

    /**
     * True when evicting {@code slot} for another tenant's sake (the bound, class pressure) would
     * take its tenant below its guarantee.
     */
    boolean guardedLocked(int slot, int slotBytes) {
        if (!enabled) return false;
        int t = slotTenant[slot];
        return t != TenantTable.UNTRACKED && resident[t] - slotBytes < guaranteed[t];
    }

    /** The least recently used unleased image of {@code tenant} among its {@code maxSlots} least recent. */
    Optional<EvictionPolicy.Victim> victimLocked(SlotTable slots, int tenant, int maxSlots) {
        if (!enabled || tenant == TenantTable.UNTRACKED) return Optional.empty();
        int slot = tail[tenant];
        for (int i = 0; i < maxSlots && slot != NONE_SLOT; i++, slot = prev[slot]) {
            if (slots.residentUnleasedLocked(slot)) return Optional.of(new EvictionPolicy.Victim(slot, slots.imageIdLocked(slot)));
        }
        return Optional.empty();
    }

    /** {@link #victimLocked} under the table's lock. */
    Optional<EvictionPolicy.Victim> victim(SlotTable slots, int tenant, int maxSlots) {
        return slots.locked(() -> victimLocked(slots, tenant, maxSlots));
    }

    /** {@link #refused(int)} under the table's lock. */
    void refused(SlotTable slots, int tenant) {
        slots.locked(() -> {
            refused(tenant);
            return null;
        });
    }

    /** Slot bytes charged to {@code tenant}, images its cap evicted, and reservations its cap refused. */
    long[] figures(SlotTable slots, int tenant) {
        return slots.locked(() -> new long[] {bytes(tenant), selfEvictions(tenant), refusals(tenant)});
    }

    /** {@link #tenantOf(int)} under the table's lock. */
    int tenantOf(SlotTable slots, int slot) {
        return slots.locked(() -> tenantOf(slot));
    }

    /** Slot bytes charged to {@code tenant}. */
    long bytes(int tenant) {
        return enabled ? bytes[tenant] : 0;
    }

    /** Images of {@code tenant} its own cap evicted. */
    long selfEvictions(int tenant) {
        return enabled ? selfEvictions[tenant] : 0;
    }

    /** Reservations of {@code tenant} refused because its cap could not be met. */
    long refusals(int tenant) {
        return enabled ? refusals[tenant] : 0;
    }

    private void unlink(int t, int slot) {
        int before = prev[slot];
        int after = next[slot];
        if (before != NONE_SLOT) next[before] = after;
        else if (head[t] == slot) head[t] = after;
        if (after != NONE_SLOT) prev[after] = before;
        else if (tail[t] == slot) tail[t] = before;
        prev[slot] = NONE_SLOT;
        next[slot] = NONE_SLOT;
    }
}
