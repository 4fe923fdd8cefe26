package io.orbitkv.core.storage.dram;

/**
 * Receives images that DRAM is evicting, each already pinned by a {@link Lease} taken before its
 * slot was retired, so the bytes stay exactly as they were until the listener lets go. This is
 * how the publish pipeline writes a block to SSD on eviction ({@code on-evict}) without racing
 * the slot's reuse.
 *
 * <p>Thread model: called on the evicting thread while it holds the key's index lock (Caffeine's
 * bin lock), after the image left the index. The listener must return quickly, must not call
 * back into the {@link DramTier} for that key (acquire, evict, commit), and must release the
 * lease exactly once, now or later from any thread; until then the slot counts as
 * evicted-but-leased and is bounded by {@code evictedLeasedBudgetBytes}.
 */
@FunctionalInterface
public interface EvictionListener {

    /**
     * {@code retained} pins the evicted image of {@code namespaceId}; release it when done.
     * Images dropped with their namespace ({@link DramTier#evictNamespace}) are not offered, nor
     * are those whose parked slot would pass {@code evictedLeasedBudgetBytes}, nor the last image a
     * reservation evicts under class pressure (it needs that slot free now).
     */
    void onEvicted(Lease retained, int namespaceId);
}
