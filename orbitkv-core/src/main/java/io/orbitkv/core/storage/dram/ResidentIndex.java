package io.orbitkv.core.storage.dram;

import com.github.benmanes.caffeine.cache.Cache;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.state.StateKey;

import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BiFunction;

/**
 * The {@link DramTier}'s index of resident images and the evictions that keep it within its
 * bounds: owns the Caffeine index ({@link PageKey}, i.e. namespace id and key, to
 * {@link ResidentImage}, built by the
 * {@link EvictionPolicy}), its reverse map from slot to page and the one {@link EvictionListener},
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
 * <p>Namespaces: the index is keyed by (namespace id, key), so two namespaces holding the same key
 * bytes hold two images, each inserted, counted, leased and evicted on its own. A key derived by
 * the Manager ({@code SHA-256(namespace digest ‖ group ‖ hash)}) cannot collide across namespaces
 * (2^-128); the same bytes in two namespaces arise when a client publishes another namespace's key
 * under the STATE_KEY form. Such a publish is a new image of its own namespace, exactly as a key
 * nobody holds would be: it neither replaces nor reveals the other namespace's image (cause
 * {@code displaced} stays 0; it is kept for the metric's continuity). Residency events still name
 * the key alone, one ADDED and one REMOVED per image; the catalog counts images per key
 * ({@code ResidencyMirror}).
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

    /**
     * Scans one class-pressure eviction makes when the victims it names are removed by other
     * threads first (each lost race means another eviction freed a slot meanwhile).
     */
    static final int MAX_VICTIM_RACES = 16;

    /** Image ids start at 1 ({@link SlotTable}), so 0 names no image: "whatever image is resident". */
    static final long ANY_IMAGE = 0;

    private final SlotTable slots;
    private final EvictionPolicy policy;
    private final Cache<PageKey, ResidentImage> index;
    /** Slot to the page of its RESIDENT image (null otherwise): set inside the insertion, cleared before retirement. */
    private final AtomicReferenceArray<PageKey> slotKeys;
    private final ResidencyStream residency;
    private final DramMetrics metrics;
    private final long maxWeightBytes;
    private final int scanEntries;
    /** The lease an evicted image is handed over with (the tier's, over the image's bytes). */
    private final BiFunction<StateKey, ResidentImage, Lease> leaseOf;
    /** Serialises the bound's enforcement, so concurrent inserts do not over-evict, and its resizing for held images. */
    private final ReentrantLock boundLock = new ReentrantLock();
    private volatile EvictionListener listener;
    /**
     * Slot bytes of resident images by namespace id, adjusted in the insertion and the removal
     * steps (under the key's bin lock). Only namespaces with arenas hold images, so at most
     * {@code maxArenaNamespaces} entries.
     */
    private final ConcurrentHashMap<Integer, LongAdder> residentBytes = new ConcurrentHashMap<>();

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
    ResidentImage lookup(PageKey key) {
        return index.getIfPresent(key);
    }

    /** {@code key}'s image without counting a use; null when absent. */
    ResidentImage peek(PageKey key) {
        return index.policy().getIfPresentQuietly(key);
    }

    /**
     * Indexes {@code fresh} under {@code key} unless an image is there already, leasing it inside
     * the insertion when {@code pin}, then enforces the bound. Returns the image indexed:
     * {@code fresh}, or the one that was first.
     */
    ResidentImage insert(PageKey key, ResidentImage fresh, boolean pin) {
        ResidentImage winner = index.get(key, k -> publish(k, fresh, pin));
        if (winner == fresh) enforceBound();
        return winner;
    }

    /**
     * Removes {@code key} if resident (and, unless {@code expectedImageId} is {@link #ANY_IMAGE}, as
     * that image), offering it to the eviction listener only when {@code handOver}.
     */
    boolean remove(PageKey key, long expectedImageId, DramMetrics.EvictionCause cause, boolean handOver) {
        boolean[] removed = {false};
        index.asMap().computeIfPresent(key, (k, image) -> {
            if (expectedImageId != ANY_IMAGE && image.imageId() != expectedImageId) return image;
            onLeftIndex(k, image, cause, handOver);
            removed[0] = true;
            return null;
        });
        return removed[0];
    }

    /** Slot bytes of {@code namespaceId}'s resident images now; 0 when it has none. */
    long residentBytes(int namespaceId) {
        LongAdder bytes = residentBytes.get(namespaceId);
        return bytes == null ? 0 : bytes.sum();
    }

    /** Removes every image of {@code namespaceId}; returns how many. Walks the whole index. */
    int removeNamespace(int namespaceId) {
        int removed = 0;
        for (Map.Entry<PageKey, ResidentImage> e : index.asMap().entrySet()) {
            if (e.getKey().namespaceId() == namespaceId
                    && remove(e.getKey(), e.getValue().imageId(), DramMetrics.EvictionCause.NAMESPACE, true)) {
                removed++;
            }
        }
        return removed;
    }

    /**
     * Holds {@code key}'s image if it is resident in {@code namespaceId} (another namespace's image
     * of the key is another page, untouched): no policy evicts it until {@link #releaseHold}. Under
     * a self-bounding index its weight drops to 0 and the bound shrinks by its bytes, so the
     * unheld images keep to {@code indexWeightBytes} minus what is held.
     */
    Optional<HeldImage> hold(StateKey key, int namespaceId) {
        PageKey page = new PageKey(namespaceId, key);
        ResidentImage image = peek(page);
        if (image == null || !slots.hold(image.slot(), image.imageId())) return Optional.empty();
        reweigh(page, image.imageId());
        return Optional.of(new HeldImage(key, namespaceId, image.slot(), image.imageId(), slots.slotBytes(image.slot())));
    }

    /** Ends {@link #hold}; false when the image is gone or was released already. */
    boolean releaseHold(HeldImage held) {
        if (!slots.unhold(held.slot(), held.imageId())) return false;
        reweigh(new PageKey(held.namespaceId(), held.key()), held.imageId());
        return true;
    }

    /** Passes {@code value} to the policy for {@code key}'s image of {@code namespaceId}; false when it has none. */
    boolean hint(StateKey key, int namespaceId, ValueHint value) {
        PageKey page = new PageKey(namespaceId, key);
        ResidentImage image = value == ValueHint.RETAIN && policy.indexEnforcesBound() ? lookup(page) : peek(page);
        return image != null && slots.hint(image.slot(), image.imageId(), value);
    }

    /** Removes {@code key}'s image of {@code namespaceId}, not handed to the eviction listener; false when it has none. */
    boolean drop(StateKey key, int namespaceId) {
        PageKey page = new PageKey(namespaceId, key);
        ResidentImage image = peek(page);
        boolean removed = image != null && remove(page, image.imageId(), DramMetrics.EvictionCause.DROPPED, false);
        if (removed) syncHeldBound();
        return removed;
    }

    /**
     * Re-weighs {@code page}'s entry if it still holds {@code imageId} (a copy of the value makes
     * Caffeine call the weigher again) and sets the bound to {@code indexWeightBytes} less the held
     * bytes. Only under a self-bounding index; the LRU tier's bound counts held bytes as used and
     * evicts other images for them.
     */
    private void reweigh(PageKey page, long imageId) {
        if (!policy.indexEnforcesBound()) return;
        index.asMap().computeIfPresent(page, (k, image) -> image.imageId() != imageId ? image
                : new ResidentImage(image.slot(), image.lengthBytes(), image.namespaceId(), image.imageId()));
        syncHeldBound();
    }

    /** Caffeine's maximum = {@code indexWeightBytes} − held bytes, so held images count against the bound. */
    private void syncHeldBound() {
        boundLock.lock();
        try {
            index.policy().eviction().ifPresent(bound -> bound.setMaximum(Math.max(0, maxWeightBytes - slots.heldBytes())));
        } finally {
            boundLock.unlock();
        }
    }

    /**
     * The keys indexed now, a weakly consistent copy: one entry per image, so a key resident in two
     * namespaces is listed twice (as its residency events count it).
     */
    List<StateKey> keys() {
        return index.asMap().keySet().stream().map(PageKey::key).toList();
    }

    /** The images of {@code key} in every namespace, a weakly consistent copy. Walks the whole index. */
    List<PageKey> pagesOf(StateKey key) {
        return index.asMap().keySet().stream().filter(p -> p.hasKey(key)).toList();
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
     * {@code handOver}. A victim another thread removed first (concurrent reservations of one
     * class name the same coldest image) is a lost race, not a dry class: the scans run again, at
     * most {@value #MAX_VICTIM_RACES} times. False when neither scan names a victim, or every
     * named one was taken.
     */
    boolean evictForClass(int sizeClass, boolean handOver) {
        for (int race = 0; race < MAX_VICTIM_RACES; race++) {
            Optional<EvictionPolicy.Victim> victim = policy.classVictim(slots, sizeClass, scanEntries);
            if (victim.isPresent() && removeVictim(victim.get(), DramMetrics.EvictionCause.CLASS_PRESSURE, handOver)) return true;
            Optional<EvictionPolicy.Victim> second = policy.fallbackVictim(slots, sizeClass, scanEntries);
            if (second.isPresent() && removeVictim(second.get(), DramMetrics.EvictionCause.CLASS_PRESSURE, handOver)) return true;
            if (victim.isEmpty() && second.isEmpty()) return false;
        }
        return false;
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
        PageKey key = slotKeys.get(victim.slot());
        return key != null && remove(key, victim.imageId(), cause, handOver);
    }

    // Runs inside Caffeine's compute for the key: the slot turns RESIDENT and ADDED is appended
    // atomically with the insertion; a pin taken here precedes any eviction the insertion triggers.
    private ResidentImage publish(PageKey key, ResidentImage fresh, boolean pin) {
        // Release order suffices: the slot table's lock (taken next) publishes it to the policy's readers.
        slotKeys.setRelease(fresh.slot(), key);
        slots.publish(fresh.slot(), fresh.imageId());
        residentBytes.computeIfAbsent(fresh.namespaceId(), id -> new LongAdder()).add(slots.slotBytes(fresh.slot()));
        StateKey stateKey = key.key();
        residency.append(stateKey, ResidencyEvent.Medium.DRAM, ResidencyEvent.Kind.ADDED, fresh.imageId(), fresh.lengthBytes());
        residency.retainedInDram(fresh.namespaceId(), stateKey, ResidencyEvent.Kind.ADDED, fresh.lengthBytes());
        if (pin && !slots.pin(fresh.slot(), fresh.imageId())) {
            throw new IllegalStateException("a freshly published slot could not be pinned: " + fresh);
        }
        return fresh;
    }

    // Runs under the key's Caffeine bin lock (eviction listener or a compute function). A listener's
    // lease is taken in the same step as the retirement, so the slot parks as evicted-but-leased;
    // no lease (the image is dropped, not handed over) when handOver is false or the
    // parked slot would not fit evictedLeasedBudgetBytes.
    private void onLeftIndex(PageKey key, ResidentImage image, DramMetrics.EvictionCause cause, boolean handOver) {
        EvictionListener current = listener;
        // Only this image's insertion and this removal write the slot's key while it is RESIDENT (both
        // under the key's bin lock), so a read and a release store replace the compare-and-set.
        if (slotKeys.get(image.slot()) == key) slotKeys.setRelease(image.slot(), null);
        boolean listened = current != null && cause != DramMetrics.EvictionCause.NAMESPACE;
        boolean offer = false;
        if (listened && handOver) {
            offer = slots.retireHandingOver(image.slot(), image.imageId(), cause); // retires either way
        } else {
            slots.retire(image.slot(), image.imageId(), cause);
        }
        residentBytes.get(image.namespaceId()).add(-slots.slotBytes(image.slot()));
        if (listened && !offer) metrics.handOverSkipped();
        StateKey stateKey = key.key();
        residency.append(stateKey, ResidencyEvent.Medium.DRAM, ResidencyEvent.Kind.REMOVED, image.imageId(), image.lengthBytes());
        residency.retainedInDram(image.namespaceId(), stateKey, ResidencyEvent.Kind.REMOVED, image.lengthBytes());
        if (offer) current.onEvicted(leaseOf.apply(stateKey, image), image.namespaceId());
    }
}
