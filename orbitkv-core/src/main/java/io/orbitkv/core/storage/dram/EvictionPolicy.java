package io.orbitkv.core.storage.dram;

import com.github.benmanes.caffeine.cache.Cache;

import java.util.List;
import java.util.Optional;
import java.util.function.BiConsumer;

/**
 * Chooses which resident image of the {@link DramTier} leaves: told of every slot event, asked for
 * victims. One instance per tier, built by {@link #of} from {@link DramTierConfig#eviction()};
 * {@link LruPolicy}, {@link TinyLfuPolicy} and {@link ChainPolicy} are today's.
 *
 * <p>Events name a global slot of the {@link SlotTable}: {@link #onInsert} (RESERVED to RESIDENT),
 * {@link #onAccess} (a lease that is a use: a hit), {@link #onRepublish} (a publish answered
 * "already resident"), {@link #onPin} and {@link #onUnpin} (a RESIDENT slot's lease count leaves
 * or returns to zero), {@link #onRemove} (the image left the index; its slot may still be
 * leased), {@link #onHold} and {@link #onRelease} (a HINT PIN begins or ends) and {@link #hint} (a
 * client's RETAIN or DEMOTE). Between an insert and its removal a slot holds one image, so a policy keys its state
 * by slot and needs no image ids.
 *
 * <p>Victims are asked for at three points: {@link #boundVictim} after an insertion, when the
 * policy (not the index, {@link #indexEnforcesBound}) keeps the resident bytes under the bound;
 * {@link #classVictim} when a size class has no free slot; {@link #fallbackVictim} when that found
 * none, or its image could not be removed. Each answer is a hint, as the slot may be leased or
 * retired right after: the tier removes the image only if its index still maps the slot's key to
 * that image id. A leased image is never a class-pressure victim.
 *
 * <p>Thread model: the event methods are called by the {@link SlotTable} inside the transition that
 * causes them, under its lock, so an event costs no lock trip of its own (a run of 64 hits is one
 * trip with its 64 access events); an implementation's per-slot state is guarded by that lock. The
 * victim methods are called by the tier with no lock held, because W-TinyLFU's scan takes
 * Caffeine's eviction lock, which is ordered before the table's; an implementation reads its
 * state and the slots' inside {@link SlotTable#locked}. An implementation never calls out of the
 * tier and takes no lock of its own.
 *
 * <p>Design note: the interface is slot-granular so that the chain-aware policy (leaf-first over
 * the prefix forest) is one more implementation: it keeps a child count per slot from the inserts
 * and removals, answers leaves before their parents from the same victim methods, and passes over
 * pinned and held slots as the others do. The one fact it needs beyond slot events, each insert's
 * parent page, is staged by the tier from the commit's {@link ChainLink} ({@link #stageChainLocked}).
 * Memory per resident page, in bytes of heap: LRU 9 (two {@code int} links and the CLOCK mark);
 * W-TinyLFU 1 (the CLOCK mark; its order and sketch live in the Caffeine index and are counted
 * there); chain 35 ({@link ChainPolicy}). The whole tier, index and slots included, measured
 * 160.7–161.6 B per resident block under LRU, 186.8 B under chain and 205.6–205.9 B under
 * W-TinyLFU at 1 M blocks ({@code DramHeapFootprintTest}; the upper figures with the held flag of
 * HINT PIN); 160.8 B and 213.7 B on the same machine before this seam, when W-TinyLFU also paid
 * for the unused recency list.
 */
interface EvictionPolicy {

    /** A RESIDENT slot and the image it held when chosen. */
    record Victim(int slot, long imageId) {
    }

    /** The policy {@code eviction} names, for a tier of {@code sizeClasses}. */
    static EvictionPolicy of(DramEviction eviction, List<SizeClass> sizeClasses) {
        return switch (eviction) {
            case LRU -> new LruPolicy(sizeClasses);
            case W_TINY_LFU -> new TinyLfuPolicy(sizeClasses);
            case CHAIN -> new ChainPolicy(sizeClasses);
        };
    }

    /**
     * Builds the tier's index of resident images over {@code slots}. When
     * {@link #indexEnforcesBound}, the index itself keeps the images' slot bytes within
     * {@code maxWeightBytes}, evicting on the calling thread and handing each victim to
     * {@code onEvicted} under the key's bin lock. Called once.
     */
    Cache<PageKey, ResidentImage> newIndex(SlotTable slots, long maxWeightBytes,
                                            BiConsumer<PageKey, ResidentImage> onEvicted);

    /** True when the index built by {@link #newIndex} bounds itself; false when the tier asks {@link #boundVictim}. */
    boolean indexEnforcesBound();

    /**
     * True when the policy wants each commit's {@link ChainLink}: the tier then calls
     * {@link #stageChainLocked} before every insertion (with {@code parentSlot} {@code -1} when the
     * commit names no resident parent).
     */
    default boolean tracksChains() {
        return false;
    }

    /**
     * The RESERVED {@code slot} is about to be inserted as the child of {@code parentSlot}'s image
     * {@code parentImageId} ({@code -1}: no parent), {@code first} or {@code last} page of its publish
     * run; {@link #onInsert} of the same slot follows unless the commit loses. Under the table's
     * lock; only called when {@link #tracksChains}.
     */
    default void stageChainLocked(SlotTable slots, int slot, int parentSlot, long parentImageId, boolean first,
                                  boolean last) {
    }

    /** RESERVED to RESIDENT: {@code slot}'s image entered the index. Under the table's lock. */
    void onInsert(int slot);

    /** A lease on {@code slot}'s resident image that counts as a use (a hit). Under the table's lock. */
    void onAccess(int slot);

    /**
     * A publish of {@code slot}'s image answered "already resident": the engine has just computed
     * it, so a recency policy counts a use. Under the table's lock.
     */
    void onRepublish(int slot);

    /**
     * {@code slot}'s resident image got its first lease. Under the table's lock. Ignored by a policy
     * that reads the lease counts when it chooses, as both here do.
     */
    default void onPin(int slot) {
    }

    /** {@code slot}'s resident image lost its last lease. Under the table's lock. As {@link #onPin}. */
    default void onUnpin(int slot) {
    }

    /** {@code slot}'s image left the index (its slot may wait for leases). Under the table's lock. */
    void onRemove(int slot);

    /**
     * A client's value hint for {@code slot}'s resident image {@code imageId} ({@link ValueHint}): RETAIN makes it
     * leave later, DEMOTE sooner, each as the policy's order allows. Never called for a held slot.
     * Under the table's lock.
     */
    void hint(int slot, long imageId, ValueHint value);

    /**
     * {@code slot}'s resident image became held ({@link SlotTable#hold}, a HINT PIN): the policy
     * must name it as no victim until {@link #onRelease}. Held slots also answer false to
     * {@link SlotTable#residentUnleasedLocked} and true to {@link SlotTable#isLeased}, so a policy
     * that already skips leased slots need do nothing. Under the table's lock.
     */
    default void onHold(int slot) {
    }

    /** {@code slot}'s image is no longer held, and still resident. Under the table's lock. */
    default void onRelease(int slot) {
    }

    /**
     * The image to evict so the resident bytes return under the bound: the first unleased one
     * among the policy's {@code maxSlots} coldest, else the coldest even if leased (its slot then
     * waits for its leases). Only asked when the index does not bound itself; empty when nothing
     * is resident.
     */
    Optional<Victim> boundVictim(SlotTable slots, int maxSlots);

    /**
     * An unleased image of {@code classIndex} to evict for a reservation of that class, among the
     * {@code maxSlots} coldest images of the policy's own order. Empty when none qualifies.
     */
    Optional<Victim> classVictim(SlotTable slots, int classIndex, int maxSlots);

    /**
     * The second chance when {@link #classVictim} found nothing it could remove: an unleased image
     * of {@code classIndex} chosen by the class's CLOCK hand over at most {@code maxSlots} of the
     * class's own slots, so a dry class is never blocked by colder images of other classes.
     */
    Optional<Victim> fallbackVictim(SlotTable slots, int classIndex, int maxSlots);
}
