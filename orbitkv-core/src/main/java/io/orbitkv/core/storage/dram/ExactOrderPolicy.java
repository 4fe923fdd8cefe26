package io.orbitkv.core.storage.dram;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import java.util.List;
import java.util.Optional;
import java.util.function.BiConsumer;

/**
 * The part {@link LruPolicy} and {@link ChainPolicy} share: each keeps its own exact order over
 * the RESIDENT slots, so the index is an unbounded Caffeine map and the tier enforces the bound
 * from {@link #boundVictim}; every victim comes from {@link #coldestLocked} in that order, and a
 * dry class falls back to the class's {@link ClockHands}.
 *
 * <p>Thread model: see {@link EvictionPolicy}; {@link #coldestLocked} runs under the
 * {@link SlotTable}'s lock. Design note: an abstract class rather than default methods, because
 * the CLOCK hands are state both subclasses mark and unmark as their slots change.
 */
abstract class ExactOrderPolicy implements EvictionPolicy {

    /** The per-class CLOCK that {@link #fallbackVictim} turns; subclasses mark a slot as it is used. */
    final ClockHands clock;

    ExactOrderPolicy(List<SizeClass> sizeClasses) {
        this.clock = new ClockHands(sizeClasses);
    }

    /**
     * The image to evict among the {@code maxSlots} coldest of this policy's order that is of class
     * {@code classIndex} ({@code -1}: any class), not within its tenant's DRAM guarantee and, when
     * {@code unleasedOnly}, holds no lease; empty when none is. Called under the slot table's lock.
     */
    abstract Optional<Victim> coldestLocked(SlotTable slots, int classIndex, boolean unleasedOnly, int maxSlots);

    @Override
    public final Cache<PageKey, ResidentImage> newIndex(SlotTable slots, long maxWeightBytes,
                                                        BiConsumer<PageKey, ResidentImage> onEvicted) {
        return Caffeine.newBuilder().executor(Runnable::run).build();
    }

    @Override
    public final boolean indexEnforcesBound() {
        return false;
    }

    @Override
    public final Optional<Victim> boundVictim(SlotTable slots, int maxSlots) {
        return slots.locked(() -> coldestLocked(slots, -1, true, maxSlots)
                .or(() -> coldestLocked(slots, -1, false, 1)));
    }

    @Override
    public final Optional<Victim> classVictim(SlotTable slots, int classIndex, int maxSlots) {
        return slots.locked(() -> coldestLocked(slots, classIndex, true, maxSlots));
    }

    @Override
    public final Optional<Victim> fallbackVictim(SlotTable slots, int classIndex, int maxSlots) {
        return clock.victim(slots, classIndex, maxSlots);
    }
}
