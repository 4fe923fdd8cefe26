package io.orbitkv.core.storage.dram;

import io.orbitkv.state.StateKey;

import java.util.Arrays;
import java.util.List;
import java.util.Optional;

/**
 * {@link DramEviction#CHAIN}: leaf-first eviction over the prefix forest the publishers' chain
 * links describe, leaves ranked by a reuse value learned online; every newcomer is admitted and a
 * dry class falls back to its {@link ClockHands}.
 *
 * <p><b>Chains.</b> Before a commit the tier stages the image's {@link ChainLink} (its parent's
 * slot, if the parent is resident in the same namespace, and whether the page is the first or last
 * of its publish run) with {@link #stageChainLocked}; {@link #onInsert} links it under the parent.
 * A page with a resident child is not on any leaf list, so it is a victim only when its children
 * are gone: a cached chain never loses a page in front of pages it still holds. Links are checked
 * by generation (bumped on every insert and removal of a slot), so a child of a removed parent is
 * simply a root: nothing walks child lists.
 *
 * <p><b>Value.</b> Each leaf belongs to one of {@value #CLASSES} turn classes and one of two kinds.
 * A run whose first page is linked to a chain end (a leaf, or the page a previous run ended on)
 * continues that chain: class + 1 (capped); any other run starts class 0; later pages of a run
 * take the run's class. Per class, chain ends made and continued are counted; per kind (the last
 * page of its run, or any other), pages inserted and pages hit at least once. A leaf's value is
 * {@code p(class) * r(kind) / (uses since its last use + 1)} with {@code p = (continued + 1) /
 * (ends + 2)} and {@code r = (hit + 1) / (inserted + 2)}; the victim is the least valuable of the
 * {@code 2 * CLASSES} lists' least recent unleased leaves. Counts are halved every
 * {@value #DECAY_EVENTS} events of their kind, so the estimate follows the traffic. Derivation
 * and measurements: docs/publish-pipeline.md, "Chain-aware DRAM eviction".
 *
 * <p>Thread model: see {@link EvictionPolicy}; every field is guarded by the {@link SlotTable}'s
 * lock ({@link #stageChainLocked} is called inside {@link SlotTable#locked}).
 *
 * <p>Invariants: a RESIDENT slot is on exactly one leaf list iff its resident-child count is 0;
 * {@code children[p]} counts the RESIDENT slots whose link to {@code p} carries {@code p}'s current
 * generation; links point to older inserts, so the forest has no cycle and, while anything is
 * resident, a leaf exists.
 *
 * <p>Design note: memory per slot, bounded and allocated once: two {@code int} list links, parent
 * slot, parent generation, own generation and child count (24 B), the last-use stamp (8 B), one
 * byte of class and flags, the held flag of HINT PIN and the CLOCK mark: 35 B, against LRU's 9 B. Staging a link costs each
 * commit one more short trip through the table's lock; a victim is found from the 16 list tails.
 */
final class ChainPolicy extends ExactOrderPolicy {

    /** Turn classes: a chain's first run, its continuation, ..., and the {@value}-th or later. */
    static final int CLASSES = 8;
    /** Events (chain ends, or inserts) counted before their counts are halved. */
    static final int DECAY_EVENTS = 4096;
    static final int NONE = -1;
    /** How far a page that becomes a leaf again is moved from its list's tail to keep the list in stamp order. */
    private static final int MAX_ORDER_STEPS = 64;

    private static final int CLASS_MASK = 0x07;
    private static final int TAIL = 0x08;
    private static final int HIT = 0x10;
    private static final int RESIDENT = 0x20;
    /** The page ended its run, or its run's last page hangs under it: a run linked here continues the chain. */
    private static final int END = 0x40;
    /** Staged flag: the page is the first of its publish run. */
    private static final int FIRST = 0x80;

    // @GuardedBy("SlotTable.lock") below
    private final int[] prev;
    private final int[] next;
    private final int[] parent;
    private final int[] parentGen;
    private final int[] gen;
    private final int[] children;
    private final long[] stamp;
    private final byte[] meta;
    /** Slots whose image a HINT PIN holds: never a victim, not even as the leased last resort. */
    private final boolean[] held;
    private final int[] heads = new int[2 * CLASSES];
    private final int[] tails = new int[2 * CLASSES];
    private final double[] ends = new double[CLASSES];
    private final double[] continued = new double[CLASSES];
    private final double[] inserted = new double[2];
    private final double[] hit = new double[2];
    private double endsCounted;
    private double insertsCounted;
    private long uses;

    ChainPolicy(List<SizeClass> sizeClasses) {
        super(sizeClasses);
        int slots = sizeClasses.stream().mapToInt(SizeClass::slotCount).sum();
        this.prev = new int[slots];
        this.next = new int[slots];
        this.parent = new int[slots];
        this.parentGen = new int[slots];
        this.gen = new int[slots];
        this.children = new int[slots];
        this.stamp = new long[slots];
        this.meta = new byte[slots];
        this.held = new boolean[slots];
        Arrays.fill(prev, NONE);
        Arrays.fill(next, NONE);
        Arrays.fill(parent, NONE);
        Arrays.fill(heads, NONE);
        Arrays.fill(tails, NONE);
    }

    @Override
    public boolean tracksChains() {
        return true;
    }

    @Override
    public void stageChainLocked(SlotTable slots, int slot, int parentSlot, long parentImageId, boolean first, boolean last) {
        boolean linked = parentSlot != NONE && parentSlot != slot && (meta[parentSlot] & RESIDENT) != 0
                && slots.imageIdLocked(parentSlot) == parentImageId;
        parent[slot] = linked ? parentSlot : NONE;
        parentGen[slot] = linked ? gen[parentSlot] : 0;
        meta[slot] = (byte) ((first ? FIRST : 0) | (last ? TAIL : 0));
    }

    @Override
    public void onInsert(int slot) {
        int flags = meta[slot];
        boolean first = (flags & FIRST) != 0;
        boolean tail = (flags & TAIL) != 0;
        int p = parent[slot];
        if (p != NONE && ((meta[p] & RESIDENT) == 0 || gen[p] != parentGen[slot])) p = NONE;
        parent[slot] = p;
        int turnClass = 0;
        if (p != NONE) {
            int parentClass = meta[p] & CLASS_MASK;
            if (!first) {
                turnClass = parentClass;
                if (tail) meta[p] |= END;
            } else if (children[p] == 0 || (meta[p] & END) != 0) {
                continued[parentClass]++;
                meta[p] &= ~END;
                turnClass = Math.min(CLASSES - 1, parentClass + 1);
            }
            if (children[p]++ == 0) unlink(p);
        }
        if (first) countEnd(turnClass);
        countInsert(tail ? 1 : 0);
        gen[slot]++;
        children[slot] = 0;
        stamp[slot] = ++uses;
        meta[slot] = (byte) (turnClass | (tail ? TAIL | END : 0) | RESIDENT);
        clock.mark(slot);
        linkAtHead(slot);
    }

    @Override
    public void onAccess(int slot) {
        if ((meta[slot] & HIT) == 0) {
            hit[(meta[slot] & TAIL) != 0 ? 1 : 0]++;
            meta[slot] |= HIT;
        }
        onRepublish(slot);
    }

    @Override
    public void onRepublish(int slot) {
        clock.mark(slot);
        stamp[slot] = ++uses;
        if (children[slot] == 0) {
            unlink(slot);
            linkAtHead(slot);
        }
    }

    @Override
    public void onRemove(int slot) {
        if (children[slot] == 0) unlink(slot);
        int p = parent[slot];
        if (p != NONE && (meta[p] & RESIDENT) != 0 && gen[p] == parentGen[slot] && --children[p] == 0) {
            linkInOrder(p);
        }
        parent[slot] = NONE;
        children[slot] = 0;
        gen[slot]++;
        meta[slot] = 0;
        held[slot] = false;
    }

    /** RETAIN counts as a use (the page moves to its list's head); DEMOTE makes it its list's oldest. */
    @Override
    public void hint(int slot, long imageId, ValueHint value) {
        if (value == ValueHint.RETAIN) {
            onAccess(slot);
            return;
        }
        clock.unmark(slot);
        stamp[slot] = 0;
        if (children[slot] == 0) {
            unlink(slot);
            linkInOrder(slot);
        }
    }

    @Override
    public void onHold(int slot) {
        held[slot] = true;
    }

    @Override
    public void onRelease(int slot) {
        held[slot] = false;
        onRepublish(slot);
    }

    /** Whether {@code slot} holds a resident image with no resident child; for tests. */
    boolean isLeaf(SlotTable slots, int slot) {
        return slots.locked(() -> (meta[slot] & RESIDENT) != 0 && children[slot] == 0);
    }

    /** {@code slot}'s turn class; for tests. */
    int turnClass(SlotTable slots, int slot) {
        return slots.locked(() -> meta[slot] & CLASS_MASK);
    }

    /**
     * Per leaf list, its least recent leaf of size class {@code classIndex} ({@code -1}: any) that,
     * when {@code unleasedOnly}, holds no lease, among the list's {@code maxSlots} least recent;
     * the least valuable of those.
     */
    @Override
    Optional<Victim> coldestLocked(SlotTable slots, int classIndex, boolean unleasedOnly, int maxSlots) {
        int best = NONE;
        double bestValue = Double.MAX_VALUE;
        for (int list = 0; list < heads.length; list++) {
            int slot = tails[list];
            for (int i = 0; i < maxSlots && slot != NONE; i++, slot = prev[slot]) {
                if (held[slot] || !slots.victimCandidateLocked(slot, classIndex, unleasedOnly)) continue;
                double value = value(slot);
                if (value < bestValue) {
                    bestValue = value;
                    best = slot;
                }
                break;
            }
        }
        return best == NONE ? Optional.empty() : Optional.of(new Victim(best, slots.imageIdLocked(best)));
    }

    private double value(int slot) {
        int turnClass = meta[slot] & CLASS_MASK;
        int kind = (meta[slot] & TAIL) != 0 ? 1 : 0;
        double continues = (continued[turnClass] + 1) / (ends[turnClass] + 2);
        double reused = (hit[kind] + 1) / (inserted[kind] + 2);
        return continues * reused / (uses - stamp[slot] + 1);
    }

    private void countEnd(int turnClass) {
        ends[turnClass]++;
        if (++endsCounted < DECAY_EVENTS) return;
        for (int c = 0; c < CLASSES; c++) {
            ends[c] /= 2;
            continued[c] /= 2;
        }
        endsCounted /= 2;
    }

    private void countInsert(int kind) {
        inserted[kind]++;
        if (++insertsCounted < DECAY_EVENTS) return;
        for (int k = 0; k < 2; k++) {
            inserted[k] /= 2;
            hit[k] /= 2;
        }
        insertsCounted /= 2;
    }

    private int listOf(int slot) {
        return (meta[slot] & CLASS_MASK) * 2 + ((meta[slot] & TAIL) != 0 ? 1 : 0);
    }

    private void linkAtHead(int slot) {
        int list = listOf(slot);
        prev[slot] = NONE;
        next[slot] = heads[list];
        if (heads[list] != NONE) prev[heads[list]] = slot;
        heads[list] = slot;
        if (tails[list] == NONE) tails[list] = slot;
    }

    /**
     * Links a page whose last child just left into its list by stamp: at the head when it is the
     * most recent (its child was evicted right after its insertion), else where the stamps say,
     * looking at most {@value #MAX_ORDER_STEPS} entries from the tail (its child was an old victim)
     * and as many from the head; past both it goes where the tail-side search stopped.
     */
    private void linkInOrder(int slot) {
        int list = listOf(slot);
        int head = heads[list];
        if (head == NONE || stamp[head] <= stamp[slot]) {
            linkAtHead(slot);
            return;
        }
        int newer = tails[list];
        for (int i = 0; i < MAX_ORDER_STEPS && stamp[newer] < stamp[slot]; i++) newer = prev[newer];
        if (stamp[newer] < stamp[slot]) {
            newer = head;
            for (int i = 0; i < MAX_ORDER_STEPS && next[newer] != NONE && stamp[next[newer]] > stamp[slot]; i++) {
                newer = next[newer];
            }
        }
        int older = next[newer];
        prev[slot] = newer;
        next[slot] = older;
        next[newer] = slot;
        if (older != NONE) prev[older] = slot;
        else tails[list] = slot;
    }

    private void unlink(int slot) {
        int list = listOf(slot);
        int before = prev[slot];
        int after = next[slot];
        if (before != NONE) next[before] = after;
        else if (heads[list] == slot) heads[list] = after;
        if (after != NONE) prev[after] = before;
        else if (tails[list] == slot) tails[list] = before;
        prev[slot] = NONE;
        next[slot] = NONE;
    }
}
