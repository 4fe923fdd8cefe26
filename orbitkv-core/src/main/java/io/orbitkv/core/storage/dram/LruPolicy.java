package io.orbitkv.core.storage.dram;


import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;

/**
 * {@link DramEviction#LRU}: the least recently inserted or used image leaves first, every
 * newcomer is admitted, and a dry class falls back to its {@link ClockHands}.
 *
 * <p>Owns an exact recency list over the RESIDENT slots (all classes), most recent at the head:
 * each slot's neighbours in two {@code int} arrays, {@link #NONE} at the ends and for slots not
 * on it. Insert, access and republish move a slot to the head; removal unlinks it; all O(1).
 *
 * <p>Value hints: RETAIN moves a slot to the head, DEMOTE to the tail (the next victim). A held
 * slot (HINT PIN) is off the list until released, when it returns at the head.
 *
 * <p>Thread model: see {@link EvictionPolicy}; the list is guarded by the {@link SlotTable}'s
 * lock. Invariant: the list holds exactly the RESIDENT slots that are not held, each once.
 *
 * <p>Design note: the index is an unbounded Caffeine map and the tier enforces the bound from
 * {@link #boundVictim}, because Caffeine's own access order drops reads under load (its read
 * buffer is lossy): 0.187 of prompt tokens at 5 % capacity on the conversation trace where this
 * exact list serves 0.199. 8 B per slot for the list, 1 B for the CLOCK mark.
 */
final class LruPolicy extends ExactOrderPolicy {

    /** No slot: the end of the recency list. */
    static final int NONE = -1;

    // @GuardedBy("SlotTable.lock") below
    private final int[] prev;
    private final int[] next;
    private int head = NONE;
    private int tail = NONE;

    LruPolicy(List<SizeClass> sizeClasses) {
        super(sizeClasses);
        int slots = sizeClasses.stream().mapToInt(SizeClass::slotCount).sum();
        this.prev = new int[slots];
        this.next = new int[slots];
        Arrays.fill(prev, NONE);
        Arrays.fill(next, NONE);
    }

    @Override
    public void onInsert(int slot) {
        clock.mark(slot);
        linkAtHead(slot);
    }

    @Override
    public void onAccess(int slot) {
        clock.mark(slot);
        unlink(slot);
        linkAtHead(slot);
    }

    @Override
    public void onRepublish(int slot) {
        onAccess(slot);
    }

    @Override
    public void onRemove(int slot) {
        unlink(slot);
    }

    @Override
    public void hint(int slot, long imageId, ValueHint value) {
        unlink(slot);
        if (value == ValueHint.RETAIN) {
            clock.mark(slot);
            linkAtHead(slot);
        } else {
            clock.unmark(slot);
            linkAtTail(slot);
        }
    }

    /** A held image leaves the list, so no scan of the coldest window ever stops at it. */
    @Override
    public void onHold(int slot) {
        unlink(slot);
    }

    /** A released image returns as the most recent: it was in use until now. */
    @Override
    public void onRelease(int slot) {
        clock.mark(slot);
        linkAtHead(slot);
    }

    /** The RESIDENT slots from least to most recently used, for tests. */
    List<Integer> recencyOrder(SlotTable slots) {
        return slots.locked(() -> {
            List<Integer> out = new ArrayList<>();
            for (int slot = tail; slot != NONE; slot = prev[slot]) out.add(slot);
            return out;
        });
    }

    /**
     * The least recently used image among the {@code maxSlots} least recent that is of class
     * {@code classIndex} ({@code -1}: any class), not within its tenant's DRAM guarantee and, when
     * {@code unleasedOnly}, holds no lease.
     */
    @Override
    Optional<Victim> coldestLocked(SlotTable slots, int classIndex, boolean unleasedOnly, int maxSlots) {
        int slot = tail;
        for (int i = 0; i < maxSlots && slot != NONE; i++, slot = prev[slot]) {
            if (slots.victimCandidateLocked(slot, classIndex, unleasedOnly)) {
                return Optional.of(new Victim(slot, slots.imageIdLocked(slot)));
            }
        }
        return Optional.empty();
    }

    // @GuardedBy("SlotTable.lock")
    private void linkAtHead(int slot) {
        prev[slot] = NONE;
        next[slot] = head;
        if (head != NONE) prev[head] = slot;
        head = slot;
        if (tail == NONE) tail = slot;
    }

    // @GuardedBy("SlotTable.lock")
    private void linkAtTail(int slot) {
        next[slot] = NONE;
        prev[slot] = tail;
        if (tail != NONE) next[tail] = slot;
        tail = slot;
        if (head == NONE) head = slot;
    }

    // @GuardedBy("SlotTable.lock")
    private void unlink(int slot) {
        int before = prev[slot];
        int after = next[slot];
        if (before != NONE) next[before] = after;
        else if (head == slot) head = after;
        if (after != NONE) prev[after] = before;
        else if (tail == slot) tail = before;
        prev[slot] = NONE;
        next[slot] = NONE;
    }
}
