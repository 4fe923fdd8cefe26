package io.orbitkv.core.storage.dram;

import com.github.benmanes.caffeine.cache.Cache;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.state.StateKey;

import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BiFunction;

/**
 * The {@link DramTier}'s index of resident images and the evictions that keep it within its
 * bounds: owns the Caffeine index (key to {@link ResidentImage}, built by the
 * {@link EvictionPolicy}), its reverse map from slot to key and the one {@link EvictionListener},
 * and appends every insertion and removal to the {@link ResidencyStream}.
 *
 * <p>Thread model: thread-safe. An insertion or removal runs inside Caffeine's compute for its
 * key, under the key's bin lock, and calls the {@link SlotTable} from there; the bound is
 * enforced after the insertion, outside Caffeine's locks, under {@link #boundLock}. Lock order:
 * {@code boundLock}, Caffeine's bin and eviction locks, the table's lock, and no other.
 *
 * <p>Invariants: a key is indexed iff its image's slot is RESIDENT with that image id, and then
 * {@link #slotKeys} maps the slot to the key; a key's residency events alternate ADDED, REMOVED
 * (both are appended under its bin lock, so they cannot reorder); a handed-over image is leased
 * in the same slot-table step that retires it, so it cannot be freed before the listener ends.
 *
 * <p>Namespaces: the index is keyed by StateKey alone, and every image carries the namespace id
 * it was published in. A key derived by the Manager ({@code SHA-256(namespace digest ‖ group ‖
 * hash)}) cannot collide across namespaces (2^-128); two namespaces hold the same key bytes only
 * when a client sent a precomputed STATE_KEY of another namespace, i.e. guessed or forged it. So
 * an insertion replaces another namespace's image of the key (cause {@code displaced}, not handed
 * to the SSD writer): the newest commit of a key wins across namespaces, the first within one. A
 * forger learns nothing and can at most evict one of the victim's images, as it could by filling
 * the tier. An index keyed by (namespace id, key) is rejected while the residency stream, the
 * catalog and the peer protocol name a page by key alone.
 *
 * <p>Design note: the policy names victims by slot, so the index keeps the reverse map (one
 * compressed reference, 4 B per slot) rather than each policy keeping keys; a victim is removed
 * only if its slot's key still maps to the image id the policy saw.
 */
final class ResidentIndex {

    /**
     * Most eviction attempts one insertion makes, when the policy bounds the index, to bring it
     * back under its bound (one insertion needs one eviction; the rest absorb races with
     * concurrent removals).
     */
    static final int MAX_BOUND_EVICTIONS = 64;

    /** Image ids start at 1 ({@link SlotTable}), so 0 names no image: "whatever image is resident". */
    static final long ANY_IMAGE = 0;

    private final SlotTable slots;
    private final EvictionPolicy policy;
    private final Cache<StateKey, ResidentImage> index;
    /** Slot to the key of its RESIDENT image (null otherwise): set inside the insertion, cleared before retirement. */
    private final AtomicReferenceArray<StateKey> slotKeys;
    private final ResidencyStream residency;
    private final DramMetrics metrics;
    private final long maxWeightBytes;
    private final int scanEntries;
    /** The lease an evicted image is handed over with (the tier's, over the image's bytes). */
    private final BiFunction<StateKey, ResidentImage, Lease> leaseOf;
    /** Serialises the bound's enforcement, so concurrent inserts do not over-evict. */
    private final ReentrantLock boundLock = new ReentrantLock();
    private volatile EvictionListener listener;

    ResidentIndex(DramTierConfig config, SlotTable slots, EvictionPolicy policy, ResidencyStream residency,
                  DramMetrics metrics, BiFunction<StateKey, ResidentImage, Lease> leaseOf) {
        this.slots = slots;
        this.policy = policy;
        this.residency = residency;
        this.metrics = metrics;
        this.leaseOf = leaseOf;
        this.maxWeightBytes = config.indexWeightBytes();
        this.scanEntries = config.pressureScanEntries();
        this.slotKeys = new AtomicReferenceArray<>(slots.slotCount());
        this.index = policy.newIndex(slots, maxWeightBytes,
                (key, image) -> onLeftIndex(key, image, DramMetrics.EvictionCause.POLICY, true));
    }

    /** {@code key}'s image, counted as a use by the index's own policy; null when absent. */
    ResidentImage lookup(StateKey key) {
        return index.getIfPresent(key);
    }

    /** {@code key}'s image without counting a use; null when absent. */
    ResidentImage peek(StateKey key) {
        return index.policy().getIfPresentQuietly(key);
    }

    /**
     * Indexes {@code fresh} under {@code key} unless an image of the same namespace is there
     * (another namespace's is displaced), leasing it inside the insertion when {@code pin}, then
     * enforces the bound. Returns the image indexed: {@code fresh}, or the one that was first.
     */
    ResidentImage insert(StateKey key, ResidentImage fresh, boolean pin) {
        ResidentImage winner = index.get(key, k -> publish(k, fresh, pin));
        if (winner != fresh && winner.namespaceId() != fresh.namespaceId()) winner = displace(key, fresh, pin);
        if (winner == fresh) enforceBound();
        return winner;
    }

    /**
     * Removes {@code key} if resident (and, unless {@code expectedImageId} is {@link #ANY_IMAGE}, as
     * that image), offering it to the eviction listener only when {@code handOver}.
     */
    boolean remove(StateKey key, long expectedImageId, DramMetrics.EvictionCause cause, boolean handOver) {
        boolean[] removed = {false};
        index.asMap().computeIfPresent(key, (k, image) -> {
            if (expectedImageId != ANY_IMAGE && image.imageId() != expectedImageId) return image;
            onLeftIndex(k, image, cause, handOver);
            removed[0] = true;
            return null;
        });
        return removed[0];
    }

    /** Removes every image of {@code namespaceId}; returns how many. Walks the whole index. */
    int removeNamespace(int namespaceId) {
        int removed = 0;
        for (Map.Entry<StateKey, ResidentImage> e : index.asMap().entrySet()) {
            if (e.getValue().namespaceId() == namespaceId
                    && remove(e.getKey(), e.getValue().imageId(), DramMetrics.EvictionCause.NAMESPACE, true)) {
                removed++;
            }
        }
        return removed;
    }

    /** The keys indexed now, a weakly consistent copy. */
    List<StateKey> keys() {
        return List.copyOf(index.asMap().keySet());
    }

    /** Sets the one listener offered evicted images; once. */
    synchronized void setListener(EvictionListener listener) {
        Objects.requireNonNull(listener, "listener");
        if (this.listener != null) throw new IllegalStateException("an eviction listener is already set");
        this.listener = listener;
    }

    /** Runs Caffeine's pending maintenance (read-buffer drain, evictions) now; for tests. */
    void cleanUp() {
        index.cleanUp();
    }

    /**
     * Evicts an unleased image of {@code sizeClass}: the policy's {@link EvictionPolicy#classVictim},
     * else its {@link EvictionPolicy#fallbackVictim}; hands it to the listener only when
     * {@code handOver}. False when neither could be removed.
     */
    boolean evictForClass(int sizeClass, boolean handOver) {
        return policy.classVictim(slots, sizeClass, scanEntries)
                .filter(v -> removeVictim(v, DramMetrics.EvictionCause.CLASS_PRESSURE, handOver)).isPresent()
                || policy.fallbackVictim(slots, sizeClass, scanEntries)
                .filter(v -> removeVictim(v, DramMetrics.EvictionCause.CLASS_PRESSURE, handOver)).isPresent();
    }

    /**
     * Evicts {@code tenant}'s least recently used unleased image (its cap is reached), handing it to
     * the listener when {@code handOver}. False when the tenant has none within the scan.
     */
    boolean evictForTenant(int tenant, boolean handOver) {
        return slots.tenants().victim(slots, tenant, scanEntries)
                .filter(v -> removeVictim(v, DramMetrics.EvictionCause.TENANT_QUOTA, handOver)).isPresent();
    }

    /**
     * When the policy bounds the index (not Caffeine), evicts its {@link EvictionPolicy#boundVictim}s
     * until the resident bytes are within {@code indexWeightBytes}, as Caffeine's bound does under
     * W-TinyLFU: evicted images go to the eviction listener like policy evictions.
     */
    private void enforceBound() {
        if (policy.indexEnforcesBound()) return;
        boundLock.lock();
        try {
            for (int i = 0; i < MAX_BOUND_EVICTIONS && slots.usedBytes() > maxWeightBytes; i++) {
                Optional<EvictionPolicy.Victim> victim = policy.boundVictim(slots, scanEntries);
                if (victim.isEmpty()) return;
                removeVictim(victim.get(), DramMetrics.EvictionCause.POLICY, true);
            }
        } finally {
            boundLock.unlock();
        }
    }

    /** Removes the image the policy named if its slot's key still maps to it (null: being removed now). */
    private boolean removeVictim(EvictionPolicy.Victim victim, DramMetrics.EvictionCause cause, boolean handOver) {
        StateKey key = slotKeys.get(victim.slot());
        return key != null && remove(key, victim.imageId(), cause, handOver);
    }

    /**
     * Puts {@code fresh} in place of another namespace's image of the same key, pinning it when
     * {@code pin}. Returns the image indexed afterwards: {@code fresh}, or a same-namespace image
     * that won a race.
     */
    private ResidentImage displace(StateKey key, ResidentImage fresh, boolean pin) {
        return index.asMap().compute(key, (k, current) -> {
            if (current != null && current.namespaceId() == fresh.namespaceId()) return current;
            if (current != null) onLeftIndex(k, current, DramMetrics.EvictionCause.DISPLACED, false);
            return publish(k, fresh, pin);
        });
    }

    // Runs inside Caffeine's compute for the key: the slot turns RESIDENT and ADDED is appended
    // atomically with the insertion; a pin taken here precedes any eviction the insertion triggers.
    private ResidentImage publish(StateKey key, ResidentImage fresh, boolean pin) {
        // Release order suffices: the slot table's lock (taken next) publishes it to the policy's readers.
        slotKeys.setRelease(fresh.slot(), key);
        slots.publish(fresh.slot(), fresh.imageId());
        residency.append(key, ResidencyEvent.Medium.DRAM, ResidencyEvent.Kind.ADDED, fresh.imageId(), fresh.lengthBytes());
        residency.retainedInDram(fresh.namespaceId(), key, ResidencyEvent.Kind.ADDED, fresh.lengthBytes());
        if (pin && !slots.pin(fresh.slot(), fresh.imageId())) {
            throw new IllegalStateException("a freshly published slot could not be pinned: " + fresh);
        }
        return fresh;
    }

    // Runs under the key's Caffeine bin lock (eviction listener or a compute function). A listener's
    // lease is taken in the same step as the retirement, so the slot parks as evicted-but-leased;
    // no lease (the image is dropped, not handed over) when handOver is false or the
    // parked slot would not fit evictedLeasedBudgetBytes.
    private void onLeftIndex(StateKey key, ResidentImage image, DramMetrics.EvictionCause cause, boolean handOver) {
        EvictionListener current = listener;
        // Only this image's insertion and this removal write the slot's key while it is RESIDENT (both
        // under the key's bin lock), so a read and a release store replace the compare-and-set.
        if (slotKeys.get(image.slot()) == key) slotKeys.setRelease(image.slot(), null);
        boolean listened = current != null && cause != DramMetrics.EvictionCause.NAMESPACE
                && cause != DramMetrics.EvictionCause.DISPLACED;
        boolean offer = false;
        if (listened && handOver) {
            offer = slots.retireHandingOver(image.slot(), image.imageId(), cause); // retires either way
        } else {
            slots.retire(image.slot(), image.imageId(), cause);
        }
        if (listened && !offer) metrics.handOverSkipped();
        residency.append(key, ResidencyEvent.Medium.DRAM, ResidencyEvent.Kind.REMOVED, image.imageId(), image.lengthBytes());
        residency.retainedInDram(image.namespaceId(), key, ResidencyEvent.Kind.REMOVED, image.lengthBytes());
        if (offer) current.onEvicted(leaseOf.apply(key, image), image.namespaceId());
    }
}
