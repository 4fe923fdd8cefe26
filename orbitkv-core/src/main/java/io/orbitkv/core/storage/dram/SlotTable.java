package io.orbitkv.core.storage.dram;

import java.util.List;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;

/**
 * The DRAM tier's slot allocator and reference counts: which slot is free, reserved, resident or
 * evicted-but-leased, how many leases pin it, which image id it currently holds, and the byte
 * accounting over all of them. It tells its {@link EvictionPolicy} of each transition that
 * matters to eviction (insert, use, first and last lease, removal) inside that transition, and its
 * {@link TenantSlots} of each that charges or discharges a tenant (reserve, abort, publish, use,
 * retire).
 *
 * <p>Size: over 500 lines because the state machine, the byte accounting and the hooks of the
 * policy and of the tenant charges are one lock's invariants; splitting them would split the lock.
 *
 * <p>Slots are numbered globally: class {@code c} owns {@code [base[c], base[c] + count[c])}.
 * Per slot the table keeps one state byte, one lease count and one image id in primitive arrays,
 * and each class keeps its free slots on an {@code int} stack: O(1) allocate and free. 18 bytes
 * of heap per slot (the policy's own state apart) and no object per slot.
 *
 * <p>State machine of one slot (all transitions are methods of this class):
 * <pre>
 *   FREE --reserve--> RESERVED --publish--> RESIDENT --retire, no leases--> FREE
 *                        |                     |  \--retire, leased (or retireHandingOver)--> EVICTED_LEASED --last unpin--> FREE
 *                        +--abort--> FREE      +-- pin/unpin (lease count) --+
 * </pre>
 * States are byte codes rather than an enum so that a slot's state costs one byte in a
 * {@code byte[]} (1 MB for 1 M slots) instead of a reference. Every transition names the image
 * id it expects; a mismatch is a bug of the caller and throws.
 * {@link #pin} is the exception: it is the lookup race (the image may have been retired and its
 * slot reused since the index was read), so it returns {@code false} instead.
 *
 * <p>Thread model: thread-safe; every method takes {@link #lock} briefly ({@link #pinUseRun} for
 * at most its caller's run bound of pins). Callers may hold Caffeine's locks while calling in
 * (eviction listener, compute functions); this class calls out only to its policy's event
 * methods, which take no lock, so the lock order is always Caffeine, then this lock. The
 * policy's state is guarded by this lock too: its victim queries run inside {@link #locked}.
 *
 * <p>Invariants: {@code free + reserved + used + evictedLeased == capacity} (bytes); a slot is
 * on its class's free stack iff its state is FREE; {@code leases[s] > 0} only in RESIDENT or
 * EVICTED_LEASED; an EVICTED_LEASED slot has {@code leases[s] > 0}; a held slot ({@link #hold})
 * is RESIDENT, and {@code heldBytes} is the slot bytes of the held slots.
 *
 * <p>Design note: one lock rather than per-class locks or CAS on packed words: an operation is
 * ~20 array reads and writes (tens of nanoseconds uncontended) and happens once per page
 * publish or read, while the page copy it guards costs microseconds (64 KiB at ~10 GB/s is
 * 6.5 us), so the lock is not the bottleneck and keeps the accounting trivially consistent.
 * A QUERY, though, leases every page of a prefix without copying any (1,024 pages per round
 * trip in the Manager benchmark), and one lock trip per page was a large share of its lookup
 * (with the lock's hand-off to a waiting publisher), so {@link #pinUseRun} and {@link #unpinRun}
 * take the lock once per run of pages; a run is bounded by its caller, so the hold stays short.
 * The class is over 500 lines because every transition of a slot (the HINT PIN's hold included)
 * changes the byte accounting under this one lock; a split would have to share the lock and the
 * arrays, and every transition would read across two classes.
 */
final class SlotTable {

    static final byte FREE = 0;
    static final byte RESERVED = 1;
    static final byte RESIDENT = 2;
    static final byte EVICTED_LEASED = 3;

    /** Outcome of {@link #reserve}. */
    sealed interface Allocation {
        record Allocated(int slot, long imageId) implements Allocation {
        }

        record Refused(ReserveResult.FullReason reason) implements Allocation {
        }
    }

    private final ReentrantLock lock = new ReentrantLock();

    private final int[] classSlotBytes;
    private final int[] classBase;
    private final long capacityBytes;
    private final long reservedBudgetBytes;
    private final long evictedLeasedBudgetBytes;
    private final EvictionPolicy policy;
    private final TenantSlots tenants;

    // @GuardedBy("lock") below
    private final int[][] freeStacks;
    private final int[] freeTops;
    private final byte[] states;
    private final int[] leases;
    private final long[] imageIds;
    /**
     * True while the slot's RESIDENT image is held by a HINT PIN ({@link #hold}): no policy names it
     * a victim. Written under the lock; {@link #weight} reads it without (see there).
     */
    private final boolean[] held;
    /**
     * Per slot, the image a settled hit last marked needed ({@link #markNeeded}; 0: none, image ids
     * start at 1). Read and written without the lock: a hint that only saves the retention ledger
     * a repeated probe, so two threads that both see it unmarked both mark it, which is harmless.
     */
    private final AtomicLongArray neededImages;
    /** Slot bytes of the held images. */
    private long heldBytes;
    private long freeBytes;
    private long reservedBytes;
    private long usedBytes;
    private long evictedLeasedBytes;
    private long leasedBytes;
    private long leaseCount;
    private long residentImages;
    private long lastImageId;
    /** Leases taken by {@link #pinUse} and {@link #pinUseRun}: the tier's hits. */
    private long usePins;
    /** Images made RESIDENT by {@link #publish}: the tier's inserts. */
    private long publishes;
    /** Images retired, by why they left the index ({@link DramMetrics.EvictionCause} ordinal). */
    private final long[] retirements = new long[DramMetrics.EvictionCause.values().length];

    SlotTable(List<SizeClass> sizeClasses, long reservedBudgetBytes, long evictedLeasedBudgetBytes,
              EvictionPolicy policy) {
        this(sizeClasses, reservedBudgetBytes, evictedLeasedBudgetBytes, policy, null);
    }

    /** As above, charging slots to the tenants of {@code tenantTable} (null: no tenant quotas). */
    SlotTable(List<SizeClass> sizeClasses, long reservedBudgetBytes, long evictedLeasedBudgetBytes,
              EvictionPolicy policy, io.orbitkv.core.namespace.TenantTable tenantTable) {
        this.policy = java.util.Objects.requireNonNull(policy, "policy");
        this.tenants = tenantTable == null ? TenantSlots.NONE
                : new TenantSlots(tenantTable, sizeClasses.stream().mapToInt(SizeClass::slotCount).sum());
        int classes = sizeClasses.size();
        this.classSlotBytes = new int[classes];
        this.classBase = new int[classes + 1];
        this.freeStacks = new int[classes][];
        this.freeTops = new int[classes];
        long capacity = 0;
        for (int c = 0; c < classes; c++) {
            SizeClass sizeClass = sizeClasses.get(c);
            classSlotBytes[c] = sizeClass.slotBytes();
            classBase[c + 1] = classBase[c] + sizeClass.slotCount();
            int[] stack = new int[sizeClass.slotCount()];
            // Lowest slot on top: a fresh tier fills the start of each file first.
            for (int i = 0; i < stack.length; i++) stack[i] = classBase[c + 1] - 1 - i;
            freeStacks[c] = stack;
            freeTops[c] = stack.length;
            capacity += sizeClass.capacityBytes();
        }
        int slots = classBase[classes];
        this.states = new byte[slots];
        this.leases = new int[slots];
        this.imageIds = new long[slots];
        this.held = new boolean[slots];
        this.neededImages = new AtomicLongArray(slots);
        this.capacityBytes = capacity;
        this.freeBytes = capacity;
        this.reservedBudgetBytes = reservedBudgetBytes;
        this.evictedLeasedBudgetBytes = evictedLeasedBudgetBytes;
    }

    /** The number of size classes. */
    int classCount() {
        return classSlotBytes.length;
    }

    /** Smallest class whose slots hold {@code lengthBytes}, or -1 when none does. */
    int classFor(int lengthBytes) {
        for (int c = 0; c < classSlotBytes.length; c++) if (classSlotBytes[c] >= lengthBytes) return c;
        return -1;
    }

    int classOf(int slot) {
        for (int c = 0; c < classSlotBytes.length; c++) if (slot < classBase[c + 1]) return c;
        throw new IndexOutOfBoundsException("slot " + slot + " of " + classBase[classSlotBytes.length]);
    }

    int slotInClass(int slot) {
        return slot - classBase[classOf(slot)];
    }

    int slotBytes(int slot) {
        return classSlotBytes[classOf(slot)];
    }

    /**
     * Marks {@code slot}'s image {@code imageId} needed by a settled hit: true unless that image was
     * marked already (the slot's next image starts unmarked). Lock-free; see {@link #neededImages}.
     */
    boolean markNeeded(int slot, long imageId) {
        if (neededImages.getOpaque(slot) == imageId) return false;
        neededImages.setOpaque(slot, imageId);
        return true;
    }

    int slotCount() {
        return states.length;
    }

    /** Takes a free slot of {@code classIndex} for a publish, unless a budget forbids it. */
    Allocation reserve(int classIndex) {
        return reserve(classIndex, io.orbitkv.core.namespace.TenantTable.UNTRACKED);
    }

    /**
     * As {@link #reserve(int)}, charged to {@code tenant}; refused {@code TENANT_QUOTA} when the
     * slot does not fit the tenant's cap (the caller evicts the tenant's own images and retries).
     */
    Allocation reserve(int classIndex, int tenant) {
        int bytes = classSlotBytes[classIndex];
        lock.lock();
        try {
            if (evictedLeasedBytes > evictedLeasedBudgetBytes) {
                return new Allocation.Refused(ReserveResult.FullReason.EVICTED_LEASED_BUDGET);
            }
            if (reservedBytes + bytes > reservedBudgetBytes) {
                return new Allocation.Refused(ReserveResult.FullReason.RESERVED_BUDGET);
            }
            // after the budgets (a refusal there needs no eviction), before the free list (the
            // tenant's own eviction may free the slot class pressure would otherwise take)
            if (!tenants.fits(tenant, bytes)) {
                return new Allocation.Refused(ReserveResult.FullReason.TENANT_QUOTA);
            }
            if (freeTops[classIndex] == 0) {
                return new Allocation.Refused(ReserveResult.FullReason.NO_FREE_SLOT);
            }
            int slot = freeStacks[classIndex][--freeTops[classIndex]];
            expect(slot, FREE);
            states[slot] = RESERVED;
            long imageId = ++lastImageId;
            imageIds[slot] = imageId;
            freeBytes -= bytes;
            reservedBytes += bytes;
            tenants.charge(slot, tenant, bytes);
            return new Allocation.Allocated(slot, imageId);
        } finally {
            lock.unlock();
        }
    }

    /** RESERVED to FREE: the publish was abandoned, or lost to an image committed first. */
    void abort(int slot, long imageId) {
        lock.lock();
        try {
            expect(slot, imageId, RESERVED);
            reservedBytes -= classSlotBytes[classOf(slot)];
            tenants.discharge(slot, classSlotBytes[classOf(slot)], false, false);
            pushFree(slot);
        } finally {
            lock.unlock();
        }
    }

    /** RESERVED to RESIDENT: the image enters the index. */
    void publish(int slot, long imageId) {
        lock.lock();
        try {
            expect(slot, imageId, RESERVED);
            int bytes = classSlotBytes[classOf(slot)];
            states[slot] = RESIDENT;
            policy.onInsert(slot);
            tenants.published(slot, bytes);
            reservedBytes -= bytes;
            usedBytes += bytes;
            residentImages++;
            publishes++;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Adds a lease if the slot still holds resident image {@code imageId}; false if it does not.
     * Quiet: the policy does not see it as a use (internal copiers).
     */
    boolean pin(int slot, long imageId) {
        return pin(slot, imageId, false);
    }

    /** As {@link #pin}, and a use for the policy ({@link EvictionPolicy#onAccess}). */
    boolean pinUse(int slot, long imageId) {
        return pin(slot, imageId, true);
    }

    private boolean pin(int slot, long imageId, boolean use) {
        lock.lock();
        try {
            if (states[slot] != RESIDENT || imageIds[slot] != imageId) return false;
            addLease(slot);
            if (use) {
                policy.onAccess(slot);
                tenants.touched(slot);
                usePins++;
            }
            return true;
        } finally {
            lock.unlock();
        }
    }

    /**
     * {@link #pinUse} of a run under one lock acquisition: leases {@code expectedImageIds[i]} in
     * {@code runSlots[i]} for {@code i = 0, 1, ...} in order and stops before the first slot that no
     * longer holds its resident image (retired, or reused since the index was read). Returns how
     * many were pinned: exactly those leading entries, so a caller that stops at the return value
     * holds nothing it does not know of. {@code n} is the caller's bound on the lock hold.
     */
    int pinUseRun(int[] runSlots, long[] expectedImageIds, int n) {
        lock.lock();
        try {
            for (int i = 0; i < n; i++) {
                int slot = runSlots[i];
                if (states[slot] != RESIDENT || imageIds[slot] != expectedImageIds[i]) return i;
                addLease(slot);
                policy.onAccess(slot);
                tenants.touched(slot);
                usePins++;
            }
            return n;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Tells the policy that resident image {@code imageId} was published again
     * ({@link EvictionPolicy#onRepublish}), without leasing it. False when the slot no longer holds it.
     */
    boolean touch(int slot, long imageId) {
        lock.lock();
        try {
            if (states[slot] != RESIDENT || imageIds[slot] != imageId) return false;
            policy.onRepublish(slot);
            tenants.touched(slot);
            return true;
        } finally {
            lock.unlock();
        }
    }

    // @GuardedBy("lock")
    private void addLease(int slot) {
        leaseCount++;
        if (leases[slot]++ > 0) return;
        leasedBytes += classSlotBytes[classOf(slot)];
        policy.onPin(slot);
    }

    /**
     * Adds a lease to a slot that already holds one on image {@code imageId}, resident or
     * evicted-but-leased; false when it holds none (the image may be gone).
     */
    boolean pinHeld(int slot, long imageId) {
        lock.lock();
        try {
            if (!holdsLease(slot, imageId)) return false;
            leases[slot]++;
            leaseCount++;
            return true;
        } finally {
            lock.unlock();
        }
    }

    /** True when {@code slot} holds at least one lease on image {@code imageId}, resident or evicted. */
    // @GuardedBy("lock")
    private boolean holdsLease(int slot, long imageId) {
        return imageIds[slot] == imageId && leases[slot] > 0 && (states[slot] == RESIDENT || states[slot] == EVICTED_LEASED);
    }

    /** Ends one lease; the last lease of an evicted image frees its slot. */
    void unpin(int slot, long imageId) {
        lock.lock();
        try {
            unpinLocked(slot, imageId);
        } finally {
            lock.unlock();
        }
    }

    // @GuardedBy("lock")
    private void unpinLocked(int slot, long imageId) {
        if (!holdsLease(slot, imageId)) {
            throw new IllegalStateException("unpin of slot " + slot + " image " + imageId + " that is not leased: "
                    + describe(slot));
        }
        leaseCount--;
        if (--leases[slot] > 0) return;
        int bytes = classSlotBytes[classOf(slot)];
        leasedBytes -= bytes;
        if (states[slot] == EVICTED_LEASED) {
            evictedLeasedBytes -= bytes;
            pushFree(slot);
        } else {
            policy.onUnpin(slot);
        }
    }

    /**
     * {@link #unpin} of a run under one lock acquisition: ends one lease on
     * {@code expectedImageIds[i]} in {@code runSlots[i]} for each {@code i < n}, in order.
     */
    void unpinRun(int[] runSlots, long[] expectedImageIds, int n) {
        lock.lock();
        try {
            for (int i = 0; i < n; i++) unpinLocked(runSlots[i], expectedImageIds[i]);
        } finally {
            lock.unlock();
        }
    }

    /**
     * RESIDENT image leaves the index: its slot is free at once if unleased, otherwise it waits
     * in EVICTED_LEASED for its last lease, counted under {@code cause}. Returns true when the
     * slot was freed now.
     */
    boolean retire(int slot, long imageId, DramMetrics.EvictionCause cause) {
        lock.lock();
        try {
            expect(slot, imageId, RESIDENT);
            retirements[cause.ordinal()]++;
            int bytes = classSlotBytes[classOf(slot)];
            if (held[slot]) {
                held[slot] = false;
                heldBytes -= bytes;
            }
            policy.onRemove(slot);
            tenants.discharge(slot, bytes, true, cause == DramMetrics.EvictionCause.TENANT_QUOTA);
            usedBytes -= bytes;
            residentImages--;
            if (leases[slot] == 0) {
                pushFree(slot);
                return true;
            }
            states[slot] = EVICTED_LEASED;
            evictedLeasedBytes += bytes;
            return false;
        } finally {
            lock.unlock();
        }
    }

    /**
     * {@link #retire}, keeping the image for a hand-over (an eviction listener's lease) when its
     * slot may wait in EVICTED_LEASED: already leased (it waits anyway), or its bytes fit
     * {@code evictedLeasedBudgetBytes}. Pin and retire are one step under the lock, so concurrent
     * hand-overs cannot overshoot the budget. Returns true when it took the lease (the caller
     * owns it and must release it once); false when the image was retired without one.
     */
    boolean retireHandingOver(int slot, long imageId, DramMetrics.EvictionCause cause) {
        lock.lock();
        try {
            expect(slot, imageId, RESIDENT);
            int bytes = classSlotBytes[classOf(slot)];
            if (leases[slot] == 0 && evictedLeasedBytes + bytes > evictedLeasedBudgetBytes) {
                retire(slot, imageId, cause);
                return false;
            }
            addLease(slot);
            retire(slot, imageId, cause);
            return true;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Holds resident image {@code imageId} (a HINT PIN): no policy names it a victim until
     * {@link #unhold} or its retirement (a DROP, a displacement). False when the slot no longer
     * holds that image or it is already held.
     */
    boolean hold(int slot, long imageId) {
        lock.lock();
        try {
            if (states[slot] != RESIDENT || imageIds[slot] != imageId || held[slot]) return false;
            held[slot] = true;
            heldBytes += classSlotBytes[classOf(slot)];
            policy.onHold(slot);
            return true;
        } finally {
            lock.unlock();
        }
    }

    /** True while {@code slot} holds resident image {@code imageId} and it is held. */
    boolean holds(int slot, long imageId) {
        return locked(() -> states[slot] == RESIDENT && imageIds[slot] == imageId && held[slot]);
    }

    /** Ends {@link #hold} of resident image {@code imageId}; false when it is not held (retired, or released). */
    boolean unhold(int slot, long imageId) {
        lock.lock();
        try {
            if (states[slot] != RESIDENT || imageIds[slot] != imageId || !held[slot]) return false;
            held[slot] = false;
            heldBytes -= classSlotBytes[classOf(slot)];
            policy.onRelease(slot);
            return true;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Passes a client's {@link ValueHint} for resident image {@code imageId} to the policy; a held
     * image is left as it is (nothing evicts it until released). False when the slot no longer holds it.
     */
    boolean hint(int slot, long imageId, ValueHint value) {
        lock.lock();
        try {
            if (states[slot] != RESIDENT || imageIds[slot] != imageId) return false;
            if (!held[slot]) policy.hint(slot, imageId, value);
            return true;
        } finally {
            lock.unlock();
        }
    }

    /**
     * The weight of {@code slot}'s image in a self-bounding index: 0 while held (Caffeine never
     * evicts a zero-weight entry for size), else its slot bytes. Read without the lock: the thread
     * that re-weighs after {@link #hold} or {@link #unhold} wrote the flag itself, and a slot reused
     * by a new image was freed (flag cleared) under the lock its new reservation then took.
     */
    int weight(int slot) {
        return held[slot] ? 0 : slotBytes(slot);
    }

    /** Slot bytes of the held images now. */
    long heldBytes() {
        return locked(() -> heldBytes);
    }

    /**
     * Runs {@code query} under this table's lock: a policy's victim choice, which reads its own
     * state and the slots' ({@link #residentUnleasedLocked}, {@link #imageIdLocked}) consistently.
     * The query must not call out of the tier.
     */
    <T> T locked(Supplier<T> query) {
        lock.lock();
        try {
            return query.get();
        } finally {
            lock.unlock();
        }
    }

    /** True when {@code slot} is RESIDENT, holds no lease and is not held ({@link #hold}). Inside {@link #locked}. */
    boolean residentUnleasedLocked(int slot) {
        assert lock.isHeldByCurrentThread();
        return states[slot] == RESIDENT && leases[slot] == 0 && !held[slot];
    }

    /**
     * True when {@code slot} is RESIDENT, holds no lease and may go for another tenant's sake: its
     * removal would not take its tenant below its DRAM guarantee. Inside {@link #locked}.
     */
    boolean evictableLocked(int slot) {
        return residentUnleasedLocked(slot) && !guardedLocked(slot);
    }

    /** True when removing {@code slot} would take its tenant below its DRAM guarantee. Inside {@link #locked}. */
    boolean guardedLocked(int slot) {
        assert lock.isHeldByCurrentThread();
        return tenants.guardedLocked(slot, classSlotBytes[classOf(slot)]);
    }

    /**
     * Whether a list policy may name {@code slot} a victim in its walk from the least recent end:
     * of class {@code classIndex} ({@code -1}: any), holding no lease when {@code unleasedOnly}, and
     * not within its tenant's DRAM guarantee (never for others' sake). Inside {@link #locked}.
     */
    boolean victimCandidateLocked(int slot, int classIndex, boolean unleasedOnly) {
        if (classIndex >= 0 && classOf(slot) != classIndex) return false;
        if (unleasedOnly && !residentUnleasedLocked(slot)) return false;
        return !guardedLocked(slot);
    }

    /** The tenant charges of the slots (read through {@link #locked}, see {@link TenantSlots}). */
    TenantSlots tenants() {
        return tenants;
    }

    /** The image id {@code slot} holds or held last. Inside {@link #locked}. */
    long imageIdLocked(int slot) {
        assert lock.isHeldByCurrentThread();
        return imageIds[slot];
    }

    /** Bytes of RESIDENT images (the index's weight). */
    long usedBytes() {
        lock.lock();
        try {
            return usedBytes;
        } finally {
            lock.unlock();
        }
    }

    /** True when the slot holds at least one lease or is held (a hint: may change right after). */
    boolean isLeased(int slot) {
        lock.lock();
        try {
            return leases[slot] > 0 || held[slot];
        } finally {
            lock.unlock();
        }
    }

    /**
     * The event counts kept under the lock, for the tier's counters: hits (leases that were uses),
     * inserts (publishes) and retirements by cause. Counting here, where the transition already
     * holds the lock and its cache lines, saves the tier a separate atomic add per event.
     */
    long usePins() {
        return locked(() -> usePins);
    }

    /** Images published so far (see {@link #usePins}). */
    long publishes() {
        return locked(() -> publishes);
    }

    /** Images retired with {@code cause} so far (see {@link #usePins}). */
    long retirements(DramMetrics.EvictionCause cause) {
        return locked(() -> retirements[cause.ordinal()]);
    }

    DramUsage usage() {
        return locked(() -> new DramUsage(capacityBytes, freeBytes, reservedBytes, usedBytes, evictedLeasedBytes,
                leasedBytes, leaseCount, residentImages));
    }

    /** State of a slot, for tests and diagnostics. */
    byte state(int slot) {
        return locked(() -> states[slot]);
    }

    /** Lease count of a slot, for tests and diagnostics. */
    int leases(int slot) {
        return locked(() -> leases[slot]);
    }

    // @GuardedBy("lock")
    private void pushFree(int slot) {
        int c = classOf(slot);
        states[slot] = FREE;
        freeStacks[c][freeTops[c]++] = slot;
        freeBytes += classSlotBytes[c];
    }

    // @GuardedBy("lock")
    private void expect(int slot, byte state) {
        if (states[slot] != state) {
            throw new IllegalStateException("slot " + slot + " expected state " + state + ": " + describe(slot));
        }
    }

    // @GuardedBy("lock")
    private void expect(int slot, long imageId, byte state) {
        if (states[slot] != state || imageIds[slot] != imageId) {
            throw new IllegalStateException("slot " + slot + " expected image " + imageId + " in state " + state
                    + ": " + describe(slot));
        }
    }

    // @GuardedBy("lock")
    private String describe(int slot) {
        return "state " + states[slot] + ", image " + imageIds[slot] + ", leases " + leases[slot];
    }
}
