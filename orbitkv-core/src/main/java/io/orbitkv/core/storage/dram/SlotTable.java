package io.orbitkv.core.storage.dram;

import java.util.List;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The DRAM tier's slot allocator and reference counts: which slot is free, reserved, resident or
 * evicted-but-leased, how many leases pin it, which image id it currently holds, and the byte
 * accounting over all of them.
 *
 * <p>Slots are numbered globally: class {@code c} owns {@code [base[c], base[c] + count[c])}.
 * Per slot the table keeps one state byte, one lease count and one image id in primitive arrays,
 * and each class keeps its free slots on an {@code int} stack: O(1) allocate and free, about
 * 17 bytes of heap per slot and no object per slot.
 *
 * <p>State machine of one slot (all transitions are methods of this class):
 * <pre>
 *   FREE --reserve--> RESERVED --publish--> RESIDENT --retire, no leases--> FREE
 *                        |                     |  \--retire, leased--> EVICTED_LEASED --last unpin--> FREE
 *                        +--abort--> FREE      +-- pin/unpin (lease count) --+
 * </pre>
 * States are byte codes rather than an enum so that a slot's state costs one byte in a
 * {@code byte[]} (1 MB for 1 M slots) instead of a reference. Every transition names the image
 * id it expects; a mismatch is a bug of the caller and throws.
 * {@link #pin} is the exception: it is the lookup race (the image may have been retired and its
 * slot reused since the index was read), so it returns {@code false} instead.
 *
 * <p>Thread model: thread-safe; every method takes {@link #lock} briefly. Callers may hold
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

    // @GuardedBy("lock") below
    private final int[][] freeStacks;
    private final int[] freeTops;
    private final byte[] states;
    private final int[] leases;
    private final long[] imageIds;
    private long freeBytes;
    private long reservedBytes;
    private long usedBytes;
    private long evictedLeasedBytes;
    private long leasedBytes;
    private long leaseCount;
    private long residentImages;
    private long lastImageId;

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
            reservedBytes -= bytes;
            usedBytes += bytes;
            residentImages++;
        } finally {
            lock.unlock();
        }
    }

    /** Adds a lease if the slot still holds resident image {@code imageId}; false if it does not. */
    boolean pin(int slot, long imageId) {
        lock.lock();
        try {
            if (states[slot] != RESIDENT || imageIds[slot] != imageId) return false;
            if (leases[slot]++ == 0) leasedBytes += classSlotBytes[classOf(slot)];
            leaseCount++;
            return true;
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
            if (imageIds[slot] != imageId || leases[slot] <= 0
                    || (states[slot] != RESIDENT && states[slot] != EVICTED_LEASED)) {
                return false;
            }
            leases[slot]++;
            leaseCount++;
            return true;
        } finally {
            lock.unlock();
        }
    }

    /** Ends one lease; the last lease of an evicted image frees its slot. */
    void unpin(int slot, long imageId) {
        lock.lock();
        try {
            if (imageIds[slot] != imageId || leases[slot] <= 0
                    || (states[slot] != RESIDENT && states[slot] != EVICTED_LEASED)) {
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
        } finally {
            lock.unlock();
        }
    }

    /**
     * RESIDENT image leaves the index: its slot is free at once if unleased, otherwise it waits
     * in EVICTED_LEASED for its last lease. Returns true when the slot was freed now.
     */
    boolean retire(int slot, long imageId) {
        lock.lock();
        try {
            expect(slot, imageId, RESIDENT);
            int bytes = classSlotBytes[classOf(slot)];
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

    /** True when the slot holds at least one lease (a hint: may change right after). */
    boolean isLeased(int slot) {
        lock.lock();
        try {
            return leases[slot] > 0;
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
