package io.orbitkv.core.storage.dram;

import java.util.List;
import java.util.Optional;

/**
 * The CLOCK (second-chance) fallback both policies share: one "used since the hand passed" mark
 * per slot and one hand per size class over the class's own slots.
 *
 * <p>Thread model: guarded by the {@link SlotTable}'s lock, like the policy that owns it (marks
 * are set from the policy's events, {@link #victimLocked} runs inside {@link SlotTable#locked}).
 *
 * <p>Design note: 1 byte per slot and an {@code int} per class. The hand exists for the case
 * the policy's own order cannot reach: a class that ran dry while its images sit behind more
 * than {@code pressureScanEntries} colder images of other classes (docs/performance.md, "DRAM
 * tier: history of its eviction mechanisms"). A window of {@code maxSlots} slots bounds the work
 * per call, where scanning the policy's order until the class turns up would be unbounded.
 */
final class ClockHands {

    private final int[] classBase;
    // @GuardedBy("SlotTable.lock") below
    /** 1 when the slot's image was inserted or used since the hand last passed it. */
    private final byte[] marks;
    /** Per class, the index within the class of the next slot the hand looks at. */
    private final int[] hands;

    ClockHands(List<SizeClass> sizeClasses) {
        this.classBase = new int[sizeClasses.size() + 1];
        for (int c = 0; c < sizeClasses.size(); c++) classBase[c + 1] = classBase[c] + sizeClasses.get(c).slotCount();
        this.marks = new byte[classBase[sizeClasses.size()]];
        this.hands = new int[sizeClasses.size()];
    }

    /** The hand passes {@code slot} over once. */
    void mark(int slot) {
        marks[slot] = 1;
    }

    /** The hand takes {@code slot} at its next pass (a DEMOTE hint). */
    void unmark(int slot) {
        marks[slot] = 0;
    }

    /** {@link #victimLocked} under the table's lock: a policy's {@link EvictionPolicy#fallbackVictim}. */
    Optional<EvictionPolicy.Victim> victim(SlotTable slots, int classIndex, int maxSlots) {
        return slots.locked(() -> victimLocked(slots, classIndex, maxSlots));
    }

    /**
     * Moves the class's hand over at most {@code maxSlots} of its slots and returns the first
     * RESIDENT, unleased slot whose image was not used since the hand last passed it, clearing the
     * marks it passes; if every candidate in that window was marked, the first of them. Empty when
     * the window holds no RESIDENT, unleased slot. A slot within its tenant's DRAM guarantee is no
     * candidate.
     */
    private Optional<EvictionPolicy.Victim> victimLocked(SlotTable slots, int classIndex, int maxSlots) {
        int base = classBase[classIndex];
        int count = classBase[classIndex + 1] - base;
        int steps = Math.min(maxSlots, count);
        int hand = hands[classIndex];
        int firstMarked = -1;
        for (int i = 0; i < steps; i++) {
            int slot = base + hand;
            hand = hand + 1 == count ? 0 : hand + 1;
            if (!slots.evictableLocked(slot)) continue;
            if (marks[slot] == 0) {
                hands[classIndex] = hand;
                return Optional.of(new EvictionPolicy.Victim(slot, slots.imageIdLocked(slot)));
            }
            marks[slot] = 0;
            if (firstMarked < 0) firstMarked = slot;
        }
        hands[classIndex] = hand;
        return firstMarked < 0 ? Optional.empty()
                : Optional.of(new EvictionPolicy.Victim(firstMarked, slots.imageIdLocked(firstMarked)));
    }
}
