package io.orbitkv.core.storage.dram;

import java.util.List;
import java.util.Optional;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The DRAM tier's slot allocator and reference counts: which slot is free, reserved, resident or
 * evicted-but-leased, how many leases pin it, which image id it currently holds, and the byte
 * accounting over all of them.
 *
 * <p>Slots are numbered globally: class {@code c} owns {@code [base[c], base[c] + count[c])}.
 * Per slot the table keeps one state byte, one lease count, one image id and one "used since the
 * clock hand passed" byte in primitive arrays, and each class keeps its free slots on an
 * {@code int} stack and its clock hand: O(1) allocate and free. A doubly linked recency list
 * over the RESIDENT slots (two {@code int} arrays) gives the exact least recently used image for
 * {@link DramEviction#LRU}. About 26 bytes of heap per slot and no object per slot.
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
 * at most its caller's run bound of pins). Callers may hold
 * Caffeine's locks while calling in (eviction listener, compute functions); this class never
 * calls out, so the lock order is always Caffeine, then this lock.
 *
 * <p>Invariants: {@code free + reserved + used + evictedLeased == capacity} (bytes); a slot is
 * on its class's free stack iff its state is FREE; {@code leases[s] > 0} only in RESIDENT or
 * EVICTED_LEASED; an EVICTED_LEASED slot has {@code leases[s] > 0}.
 *
 * <p>Design note: one lock rather than per-class locks or CAS on packed words: an operation is
 * ~20 array reads and writes (tens of nanoseconds uncontended) and happens once per page
 * publish or read, while the page copy it guards costs microseconds (64 KiB at ~10 GB/s is
 * 6.5 us), so the lock is not the bottleneck and keeps the accounting trivially consistent.
 * A QUERY, though, leases every page of a prefix without copying any (1,024 pages per round
 * trip in the Manager benchmark), and one lock trip per page was a large share of its lookup
 * (with the lock's hand-off to a waiting publisher), so {@link #pinUseRun} and {@link #unpinRun}
 * take the lock once per run of pages; a run is bounded by its caller, so the hold stays short.
 */
final class SlotTable {

    static final byte FREE = 0;
    static final byte RESERVED = 1;
    static final byte RESIDENT = 2;
    static final byte EVICTED_LEASED = 3;

    /** No slot: the end of the recency list. */
    static final int NONE = -1;

    /** Outcome of {@link #reserve}. */
    sealed interface Allocation {
        record Allocated(int slot, long imageId) implements Allocation {
        }

        record Refused(ReserveResult.FullReason reason) implements Allocation {
        }
    }

    /** A RESIDENT, unleased slot the class's clock hand chose, with the image it held when chosen. */
    record ClockVictim(int slot, long imageId) {
    }

    private final ReentrantLock lock = new ReentrantLock();

    private final int[] classSlotBytes;
    private final int[] classBase;
    private final long capacityBytes;
    private final long reservedBudgetBytes;
    private final long evictedLeasedBudgetBytes;

    // @GuardedBy("lock") below
    private final int[][] freeStacks;
    private final int[] freeTops;
    private final byte[] states;
    private final int[] leases;
    private final long[] imageIds;
    /** 1 when the slot's image was used ({@link #pinUse}) or published since the hand last passed it. */
    private final byte[] referenced;
    /** Per class, the clock hand: the index within the class of the next slot it looks at. */
    private final int[] hands;
    /**
     * The recency list over RESIDENT slots (all classes), most recent at {@link #lruHead}: each
     * slot's neighbours, {@link #NONE} at the ends and for slots not on the list. Publish and
     * {@link #pinUse} move a slot to the head; retiring unlinks it. Exact, O(1) per operation.
     */
    private final int[] lruPrev;
    private final int[] lruNext;
    private int lruHead = NONE;
    private int lruTail = NONE;
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

    SlotTable(List<SizeClass> sizeClasses, long reservedBudgetBytes, long evictedLeasedBudgetBytes) {
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
            for (int i = 0; i < stack.length; i++) {
                stack[i] = classBase[c + 1] - 1 - i;
            }
            freeStacks[c] = stack;
            freeTops[c] = stack.length;
            capacity += sizeClass.capacityBytes();
        }
        int slots = classBase[classes];
        this.states = new byte[slots];
        this.leases = new int[slots];
        this.imageIds = new long[slots];
        this.referenced = new byte[slots];
        this.hands = new int[classes];
        this.lruPrev = new int[slots];
        this.lruNext = new int[slots];
        java.util.Arrays.fill(lruPrev, NONE);
        java.util.Arrays.fill(lruNext, NONE);
        this.capacityBytes = capacity;
        this.freeBytes = capacity;
        this.reservedBudgetBytes = reservedBudgetBytes;
        this.evictedLeasedBudgetBytes = evictedLeasedBudgetBytes;
    }

    /** Smallest class whose slots hold {@code lengthBytes}, or -1 when none does. */
    int classFor(int lengthBytes) {
        for (int c = 0; c < classSlotBytes.length; c++) {
            if (classSlotBytes[c] >= lengthBytes) return c;
        }
        return -1;
    }

    int classOf(int slot) {
        for (int c = 0; c < classSlotBytes.length; c++) {
            if (slot < classBase[c + 1]) return c;
        }
        throw new IndexOutOfBoundsException("slot " + slot + " of " + classBase[classSlotBytes.length]);
    }

    int slotInClass(int slot) {
        return slot - classBase[classOf(slot)];
    }

    int slotBytes(int slot) {
        return classSlotBytes[classOf(slot)];
    }

    int slotCount() {
        return states.length;
    }

    /** Takes a free slot of {@code classIndex} for a publish, unless a budget forbids it. */
    Allocation reserve(int classIndex) {
        int bytes = classSlotBytes[classIndex];
        lock.lock();
        try {
            if (evictedLeasedBytes > evictedLeasedBudgetBytes) {
                return new Allocation.Refused(ReserveResult.FullReason.EVICTED_LEASED_BUDGET);
            }
            if (reservedBytes + bytes > reservedBudgetBytes) {
                return new Allocation.Refused(ReserveResult.FullReason.RESERVED_BUDGET);
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
            referenced[slot] = 1;
            linkAtHead(slot);
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
     * Quiet: the clock hand does not see it as a use (internal copiers).
     */
    boolean pin(int slot, long imageId) {
        return pin(slot, imageId, false);
    }

    /** As {@link #pin}, and marks the image used, so the clock hand passes it over once. */
    boolean pinUse(int slot, long imageId) {
        return pin(slot, imageId, true);
    }

    private boolean pin(int slot, long imageId, boolean use) {
        lock.lock();
        try {
            if (states[slot] != RESIDENT || imageIds[slot] != imageId) return false;
            if (leases[slot]++ == 0) leasedBytes += classSlotBytes[classOf(slot)];
            leaseCount++;
            if (use) {
                markUsed(slot);
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
                if (leases[slot]++ == 0) leasedBytes += classSlotBytes[classOf(slot)];
                leaseCount++;
                markUsed(slot);
                usePins++;
            }
            return n;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Marks resident image {@code imageId} used without leasing it: to the head of the recency
     * list, and passed over once by the clock hand. False when the slot no longer holds it.
     */
    boolean touch(int slot, long imageId) {
        lock.lock();
        try {
            if (states[slot] != RESIDENT || imageIds[slot] != imageId) return false;
            markUsed(slot);
            return true;
        } finally {
            lock.unlock();
        }
    }

    /** A use of {@code slot}: marked for the clock hand and moved to the head of the recency list. */
    // @GuardedBy("lock")
    private void markUsed(int slot) {
        referenced[slot] = 1;
        unlink(slot);
        linkAtHead(slot);
    }

    /**
     * Second-chance (CLOCK) choice of a victim in class {@code classIndex}: moves the class's hand
     * over at most {@code maxSlots} of its slots and returns the first RESIDENT, unleased slot
     * whose image was not used since the hand last passed it, clearing the marks it passes; if
     * every candidate in that window was marked, the first of them. Empty when the window holds
     * no RESIDENT, unleased slot. The state is a hint: the slot may be leased or retired right
     * after, so the caller removes the image only if its index still maps it to this image.
     */
    Optional<ClockVictim> clockVictim(int classIndex, int maxSlots) {
        lock.lock();
        try {
            int base = classBase[classIndex];
            int count = classBase[classIndex + 1] - base;
            int steps = Math.min(maxSlots, count);
            int hand = hands[classIndex];
            int firstMarked = -1;
            for (int i = 0; i < steps; i++) {
                int slot = base + hand;
                hand = hand + 1 == count ? 0 : hand + 1;
                if (states[slot] != RESIDENT || leases[slot] > 0) continue;
                if (referenced[slot] == 0) {
                    hands[classIndex] = hand;
                    return Optional.of(new ClockVictim(slot, imageIds[slot]));
                }
                referenced[slot] = 0;
                if (firstMarked < 0) firstMarked = slot;
            }
            hands[classIndex] = hand;
            return firstMarked < 0 ? Optional.empty()
                    : Optional.of(new ClockVictim(firstMarked, imageIds[firstMarked]));
        } finally {
            lock.unlock();
        }
    }

    /**
     * Adds a lease to a slot that already holds one on image {@code imageId}, resident or
     * evicted-but-leased; false when it holds none (the image may be gone).
     */
    boolean pinHeld(int slot, long imageId) {
        lock.lock();
        try {
            if (!holdsLease(slot, imageId)) {
                return false;
            }
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
            unlink(slot);
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
            if (leases[slot]++ == 0) leasedBytes += bytes;
            leaseCount++;
            retire(slot, imageId, cause);
            return true;
        } finally {
            lock.unlock();
        }
    }

    /**
     * The least recently used RESIDENT image (published or {@link #pinUse}d longest ago) among the
     * {@code maxSlots} least recent ones that is of class {@code classIndex} ({@code -1}: any class)
     * and, when {@code unleasedOnly}, holds no lease. Empty when none of those qualifies. A hint,
     * as {@link #clockVictim}: the caller removes the image only if its index still maps it.
     */
    Optional<ClockVictim> leastRecent(int classIndex, boolean unleasedOnly, int maxSlots) {
        lock.lock();
        try {
            int slot = lruTail;
            for (int i = 0; i < maxSlots && slot != NONE; i++, slot = lruPrev[slot]) {
                if (classIndex >= 0 && classOf(slot) != classIndex) continue;
                if (unleasedOnly && leases[slot] > 0) continue;
                return Optional.of(new ClockVictim(slot, imageIds[slot]));
            }
            return Optional.empty();
        } finally {
            lock.unlock();
        }
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

    /** The RESIDENT slots from least to most recently used, for tests. */
    List<Integer> recencyOrder() {
        lock.lock();
        try {
            List<Integer> out = new java.util.ArrayList<>();
            for (int slot = lruTail; slot != NONE; slot = lruPrev[slot]) out.add(slot);
            return out;
        } finally {
            lock.unlock();
        }
    }

    /** True when the slot holds at least one lease (a hint: may change right after). */
    boolean isLeased(int slot) {
        lock.lock();
        try {
            return leases[slot] > 0;
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
        lock.lock();
        try {
            return usePins;
        } finally {
            lock.unlock();
        }
    }

    /** Images published so far (see {@link #usePins}). */
    long publishes() {
        lock.lock();
        try {
            return publishes;
        } finally {
            lock.unlock();
        }
    }

    /** Images retired with {@code cause} so far (see {@link #usePins}). */
    long retirements(DramMetrics.EvictionCause cause) {
        lock.lock();
        try {
            return retirements[cause.ordinal()];
        } finally {
            lock.unlock();
        }
    }

    DramUsage usage() {
        lock.lock();
        try {
            return new DramUsage(capacityBytes, freeBytes, reservedBytes, usedBytes, evictedLeasedBytes,
                    leasedBytes, leaseCount, residentImages);
        } finally {
            lock.unlock();
        }
    }

    /** State of a slot, for tests and diagnostics. */
    byte state(int slot) {
        lock.lock();
        try {
            return states[slot];
        } finally {
            lock.unlock();
        }
    }

    /** Lease count of a slot, for tests and diagnostics. */
    int leases(int slot) {
        lock.lock();
        try {
            return leases[slot];
        } finally {
            lock.unlock();
        }
    }

    // @GuardedBy("lock")
    private void linkAtHead(int slot) {
        lruPrev[slot] = NONE;
        lruNext[slot] = lruHead;
        if (lruHead != NONE) lruPrev[lruHead] = slot;
        lruHead = slot;
        if (lruTail == NONE) lruTail = slot;
    }

    // @GuardedBy("lock")
    private void unlink(int slot) {
        int prev = lruPrev[slot];
        int next = lruNext[slot];
        if (prev != NONE) lruNext[prev] = next;
        else if (lruHead == slot) lruHead = next;
        if (next != NONE) lruPrev[next] = prev;
        else if (lruTail == slot) lruTail = prev;
        lruPrev[slot] = NONE;
        lruNext[slot] = NONE;
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
