package io.orbitkv.core.storage.dram;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import com.github.benmanes.caffeine.cache.Policy;
import com.github.benmanes.caffeine.cache.RemovalCause;

import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.function.BiConsumer;

/**
 * {@link DramEviction#W_TINY_LFU}: Caffeine's W-TinyLFU under a byte weight is the index and its
 * bound (a newcomer enters only if its estimated frequency beats the victim's), Caffeine's
 * coldest-first order picks class-pressure victims, and a dry class falls back to its
 * {@link ClockHands}.
 *
 * <p>Owns the CLOCK marks and, once {@link #newIndex} has built the index, a handle on its size
 * policy. Caffeine sees accesses through the index's own reads, so the events only mark the
 * CLOCK; a republish is not a use (as Caffeine's quiet lookup is not).
 *
 * <p>Thread model: see {@link EvictionPolicy}; the marks are guarded by the {@link SlotTable}'s
 * lock. {@link #classVictim} runs under Caffeine's eviction lock and takes the table's lock per
 * entry it looks at (the tier's order: Caffeine, then the table).
 *
 * <p>Design note: 1 B per slot here; Caffeine's node, its access-order links and frequency
 * sketch (~48 B per entry) are counted with the index. W-TinyLFU keeps hot prefixes against
 * one-off scans; on conversation traces it refuses next-turn blocks on their first reference
 * (0.147 of prompt tokens at 5 % capacity against LRU's 0.199, {@link DramEviction}).
 */
final class TinyLfuPolicy implements EvictionPolicy {

    /** Most DEMOTEd images remembered for class pressure; the oldest is forgotten past it. */
    static final int DEMOTED_CAPACITY = 1024;

    private final ClockHands clock;
    // @GuardedBy("SlotTable.lock") below: a ring of DEMOTEd slots and the images they held then
    private final int[] demotedSlots = new int[DEMOTED_CAPACITY];
    private final long[] demotedImages = new long[DEMOTED_CAPACITY];
    private int demotedNext;
    private int demotedCount;
    /**
     * Caffeine's size policy of the index; set once by {@link #newIndex} in the tier's constructor,
     * so the tier's final fields publish it to every thread that reaches the tier.
     */
    private Policy.Eviction<PageKey, ResidentImage> order;

    TinyLfuPolicy(List<SizeClass> sizeClasses) {
        this.clock = new ClockHands(sizeClasses);
    }

    @Override
    public Cache<PageKey, ResidentImage> newIndex(SlotTable slots, long maxWeightBytes,
                                                   BiConsumer<PageKey, ResidentImage> onEvicted) {
        if (order != null) throw new IllegalStateException("the index is already built");
        Cache<PageKey, ResidentImage> index = Caffeine.newBuilder()
                .maximumWeight(maxWeightBytes)
                .weigher((PageKey key, ResidentImage image) -> slots.weight(image.slot()))
                .executor(Runnable::run)
                .evictionListener((PageKey key, ResidentImage image, RemovalCause cause) ->
                        onEvicted.accept(Objects.requireNonNull(key), Objects.requireNonNull(image)))
                .build();
        this.order = index.policy().eviction().orElseThrow();
        return index;
    }

    @Override
    public boolean indexEnforcesBound() {
        return true;
    }

    @Override
    public void onInsert(int slot) {
        clock.mark(slot);
    }

    @Override
    public void onAccess(int slot) {
        clock.mark(slot);
    }

    @Override
    public void onRepublish(int slot) {
        // Not a use: Caffeine's frequency sketch is not told either.
    }

    @Override
    public void onRemove(int slot) {
        // The index forgets the entry; the slot's mark is set again by its next insert.
    }

    /**
     * RETAIN sets the CLOCK mark (the tier also reads the image through the index, a use for
     * Caffeine's sketch and order); DEMOTE clears it and remembers the image, which class pressure
     * then takes before Caffeine's coldest. Caffeine's own bound has no way to be told.
     */
    @Override
    public void hint(int slot, long imageId, ValueHint value) {
        if (value == ValueHint.RETAIN) {
            clock.mark(slot);
            return;
        }
        clock.unmark(slot);
        demotedSlots[demotedNext] = slot;
        demotedImages[demotedNext] = imageId;
        demotedNext = (demotedNext + 1) % DEMOTED_CAPACITY;
        demotedCount = Math.min(demotedCount + 1, DEMOTED_CAPACITY);
    }

    @Override
    public Optional<Victim> boundVictim(SlotTable slots, int maxSlots) {
        return Optional.empty();
    }

    @Override
    public Optional<Victim> classVictim(SlotTable slots, int classIndex, int maxSlots) {
        Optional<Victim> demoted = slots.locked(() -> demotedVictimLocked(slots, classIndex, maxSlots));
        if (demoted.isPresent()) return demoted;
        return order.coldest(entries -> entries
                .limit(maxSlots)
                .map(Policy.CacheEntry::getValue)
                .filter(image -> slots.classOf(image.slot()) == classIndex && !slots.isLeased(image.slot()))
                .map(image -> new Victim(image.slot(), image.imageId()))
                .findFirst());
    }

    /** The most recently DEMOTEd image of {@code classIndex} still resident, unleased and unheld, among {@code maxSlots}. */
    private Optional<Victim> demotedVictimLocked(SlotTable slots, int classIndex, int maxSlots) {
        for (int i = 0, at = demotedNext; i < Math.min(demotedCount, maxSlots); i++) {
            at = at == 0 ? DEMOTED_CAPACITY - 1 : at - 1;
            int slot = demotedSlots[at];
            if (slots.classOf(slot) == classIndex && slots.residentUnleasedLocked(slot)
                    && slots.imageIdLocked(slot) == demotedImages[at]) {
                return Optional.of(new Victim(slot, demotedImages[at]));
            }
        }
        return Optional.empty();
    }

    @Override
    public Optional<Victim> fallbackVictim(SlotTable slots, int classIndex, int maxSlots) {
        return clock.victim(slots, classIndex, maxSlots);
    }
}
