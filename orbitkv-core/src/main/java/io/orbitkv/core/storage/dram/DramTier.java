package io.orbitkv.core.storage.dram;

import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.core.namespace.TenantTable;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.state.StateKey;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.security.SecureRandom;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The Manager's shared-memory DRAM tier: owns the per-namespace memfd arenas ({@link DramArenas},
 * addressed through {@link SlotMemory}), the slot allocator and reference counts
 * ({@link SlotTable}), the {@link EvictionPolicy} and the index of resident images
 * ({@link ResidentIndex}, which reports every insert and removal to the {@link ResidencyStream}).
 *
 * <p>Lifecycle of an image: {@link #reserve} takes a slot of the smallest size class that holds
 * the image; the publisher writes the bytes; {@link #commit} makes the image visible (first
 * commit of a key wins, pages are immutable) or {@link #abort} gives the slot back. Readers
 * {@link #acquire} a {@link Lease} that pins the image. Eviction (the policy, {@link #evict},
 * {@link #evictNamespace}, or class pressure) removes the image from the index at once, so no new
 * reader finds it, but its slot returns to the free list only when the last lease is released. A
 * query leases a prefix's consecutive pages with {@link #acquireRun} and ends them with
 * {@link #releaseAll}, one slot-table lock trip per {@value #RUN_PAGES} pages.
 *
 * <p>Hooks for internal copiers (the publish pipeline and staging): {@link #commitAndAcquire}
 * leases the new image inside its insertion, so an image the policy refuses at once is still
 * readable by the caller that paid for it; {@link #acquireImage} leases an exact image without
 * counting a use; {@link #share} adds a lease to an already leased image; an
 * {@link EvictionListener} set once with {@link #setEvictionListener} is handed each evicted
 * image (not namespace drops) pinned by a lease taken before its slot was retired. A
 * {@link ChainLink} the publisher set on a reservation ({@link Reservation#chain}) is resolved to
 * its parent's slot and staged with a policy that tracks chains before the commit's insertion.
 *
 * <p>Thread model: every public method is thread-safe and non-blocking apart from short locks
 * (first the index's bound lock when the policy bounds the index, then Caffeine's per-bin and
 * eviction locks, then the slot table's lock, in that order only). Caffeine's maintenance and the bound's
 * evictions run on the calling thread ({@code executor(Runnable::run)}), so an eviction has freed
 * its slot (or parked it as evicted-but-leased) before the commit that caused it returns.
 * {@link #close()} is for when traffic has stopped: afterwards calls fail with
 * {@link IllegalStateException}, and segments handed out earlier fail on access rather than
 * reading unmapped memory. Releasing leases and aborting reservations stays legal after close.
 *
 * <p>Invariants: an image is in the index iff its slot is RESIDENT with that image id; a key's
 * residency events alternate ADDED, REMOVED (both are appended under the key's Caffeine bin
 * lock, so they cannot reorder); {@link DramUsage}'s byte sum equals the capacity at all times.
 *
 * <p>Namespaces: an image is identified by ({@link PageKey}: namespace id, key), and every call
 * that finds, leases or evicts an image names the namespace; the same key bytes in two namespaces
 * are two images that never see, replace or evict each other except through the shared capacity
 * ({@link ResidentIndex}). Only {@link #residentKeys} (the catalog's resynchronisation) lists keys
 * of every namespace.
 *
 * <p>Tenant quotas ({@link TenantSlots}, configured by {@code TenantQuotas}): each reservation is
 * charged, by slot bytes, to the tenant its namespace and label resolve to until it is aborted or
 * its image leaves the index. A tenant at its DRAM cap evicts its own least recently used
 * unleased images to make room (cause {@code tenant_quota}), else its reservation is refused
 * ({@link ReserveResult.FullReason#TENANT_QUOTA}); the bound, class pressure and the CLOCK
 * fallback pass over an image whose removal would take its tenant below its DRAM guarantee. A cap
 * keeps a tenant from taking others' room; a guarantee keeps others' pressure off a tenant's pages.
 *
 * <p>Size: over 500 lines because this is the tier's one public face (reserve, commit, the lease
 * calls, the hooks for copiers and tenants); the mechanics behind each are in the package-private
 * classes it wires.
 *
 * <p>Design note on eviction: three mechanisms, each asking the policy for a slot. The bound:
 * Caffeine's own under W-TinyLFU; otherwise each insertion that takes the resident bytes past
 * {@code indexWeightBytes} evicts {@link EvictionPolicy#boundVictim}s (at most
 * {@value ResidentIndex#MAX_BOUND_EVICTIONS}). Class pressure: the bound is one weight over all classes but
 * slots are per class, so a class can run dry below it; then {@link #reserve} evicts the class's
 * {@link EvictionPolicy#classVictim}, else its CLOCK {@link EvictionPolicy#fallbackVictim} (at
 * most {@value #MAX_PRESSURE_EVICTIONS} per call, plus up to {@value #MAX_FREEING_EVICTIONS} whose
 * freed slot a concurrent reservation took first; each scanning at most
 * {@code pressureScanEntries}, again when another thread removed the named victim first).
 * Explicit, namespace and HINT DROP removals. A held image (HINT PIN, {@link #hold}) is no victim
 * of the bound, of class pressure or of the CLOCK until released. A victim handed to the
 * {@link EvictionListener} (on-evict's SSD write) keeps its slot parked until the write ends, so
 * a reservation's evictions after its first {@code MAX_PRESSURE_EVICTIONS - 1} hand nothing over
 * and free their slot at once;
 * hand-overs also stop where a parked slot would pass {@code evictedLeasedBudgetBytes}. Heap per
 * resident block, index, policy and slots together: 170.3–170.5 B under LRU, 197.6 B under chain
 * and 214.8 B under W-TinyLFU at 1 M blocks ({@code DramHeapFootprintTest}; budget 256 B; 8–11 B
 * of it the slot's needed-image mark since 2026-12-06), {@link PageKey} storing the key's words
 * inline. The measurements behind
 * each mechanism: docs/performance.md, "DRAM tier: history of its eviction mechanisms".
 */
public final class DramTier implements AutoCloseable {

    /** Most images one reservation may evict, handing each but the last to the eviction listener, to find a slot in its class. */
    static final int MAX_PRESSURE_EVICTIONS = 8;

    /**
     * Most evictions past the hand-overs that free their slot at once, when concurrent
     * reservations of the class take each freed slot first (every such loss is another
     * reservation served, so the class is not dry).
     */
    static final int MAX_FREEING_EVICTIONS = 32;

    /**
     * Most of its own images one reservation of a tenant at its DRAM cap may evict: a 2 MiB image
     * in place of 64 KiB ones needs 32.
     */
    static final int MAX_TENANT_EVICTIONS = 64;

    /**
     * Most pins {@link #acquireRun} takes under one slot-table lock acquisition: 64 pins hold the
     * lock about a microsecond, so a publisher or an eviction waits no longer than that, while a
     * 1,024-page hit takes the lock 16 times instead of 1,024.
     */
    static final int RUN_PAGES = 64;

    private final DramTierConfig config;
    private final DramArenas arenas;
    private final SlotTable slots;
    private final SlotMemory memory;
    private final ResidentIndex index;
    private final EvictionPolicy policy;
    private final DramMetrics metrics;
    private final AtomicBoolean closed = new AtomicBoolean();

    private DramTier(DramTierConfig config, DramArenas arenas, ResidencyStream residency, MeterRegistry registry,
                     TenantTable tenants) {
        this.config = config;
        this.arenas = arenas;
        EvictionPolicy policy = EvictionPolicy.of(config.eviction(), config.sizeClasses());
        this.slots = new SlotTable(config.sizeClasses(), config.reservedBudgetBytes(),
                config.evictedLeasedBudgetBytes(), policy, tenants);
        this.memory = new SlotMemory(arenas, slots);
        this.metrics = new DramMetrics(registry, config.arenaName(), slots);
        metrics.arenaNamespaces(arenas::namespaces);
        metrics.tenants(slots);
        this.index = new ResidentIndex(config, slots, policy, residency, metrics, this::newLease);
        this.policy = policy;
    }

    /**
     * Prepares the per-namespace arenas of {@code config} (each created on first use) and returns the
     * open tier. Meters are registered in {@code registry}; residency changes go to
     * {@code residency}.
     */
    public static DramTier open(DramTierConfig config, ResidencyStream residency, MeterRegistry registry)
            throws IOException {
        return open(config, residency, registry, TenantTable.none());
    }

    /**
     * As {@link #open(DramTierConfig, ResidencyStream, MeterRegistry)}, charging reservations to the
     * tenants of {@code tenants} (see the class note on tenant quotas). A DRAM guarantee needs the
     * LRU or chain policy: W-TinyLFU's own bound (Caffeine's) cannot pass over guaranteed images.
     */
    public static DramTier open(DramTierConfig config, ResidencyStream residency, MeterRegistry registry,
                                TenantTable tenants) throws IOException {
        Objects.requireNonNull(residency, "residency");
        Objects.requireNonNull(registry, "registry");
        Objects.requireNonNull(tenants, "tenants");
        long guaranteed = 0;
        for (int t = 1; t < tenants.size(); t++) guaranteed += tenants.dramGuaranteedBytes(t);
        config.requireGuaranteesFit(guaranteed);
        // Non-negative so that Java (long) and Python (struct "Q") print the same number.
        long incarnation = new SecureRandom().nextLong() & Long.MAX_VALUE;
        return new DramTier(config, new DramArenas(config, incarnation), residency, registry, tenants);
    }

    /**
     * Reserves a writable slot for {@code key}'s image of {@code lengthBytes} in {@code namespaceId}.
     * Returns {@link ReserveResult.AlreadyResident} when the key is already resident in that
     * namespace (nothing to write; another namespace's image of the key does not count) and
     * {@link ReserveResult.Full} when no slot can be had within the budgets.
     */
    public ReserveResult reserve(StateKey key, int namespaceId, int lengthBytes) {
        return reserve(key, namespaceId, lengthBytes, null);
    }

    /**
     * As {@link #reserve(StateKey, int, int)} for a publisher that named tenant {@code tenantLabel}
     * (null: none), charged to the tenant it resolves to. When the slot would take that tenant past
     * its DRAM cap, the tenant's own least recently used unleased images are evicted first (at most
     * {@value #MAX_TENANT_EVICTIONS}); if that is not enough the reservation is refused
     * {@link ReserveResult.FullReason#TENANT_QUOTA}, and no other tenant's image is touched.
     */
    public ReserveResult reserve(StateKey key, int namespaceId, int lengthBytes, String tenantLabel) {
        Objects.requireNonNull(key, "key");
        if (lengthBytes <= 0) throw new IllegalArgumentException("lengthBytes must be positive: " + lengthBytes);
        requireOpen();
        int sizeClass = slots.classFor(lengthBytes);
        if (sizeClass < 0) return refuse(ReserveResult.FullReason.NO_SIZE_CLASS);
        if (!memory.ensureArenas(namespaceId)) return refuse(ReserveResult.FullReason.ARENA_NAMESPACES);
        ResidentImage resident = index.peek(new PageKey(namespaceId, key));
        if (resident != null) {
            // A recency policy counts this as a use, so the commits of the same batch cannot evict the
            // page between this answer and the pages after it.
            slots.touch(resident.slot(), resident.imageId());
            return new ReserveResult.AlreadyResident(resident.imageId());
        }
        int tenant = slots.tenants().table().resolve(namespaceId, tenantLabel);
        int tenantEvictions = 0;
        for (int pressureEvictions = 0; ; ) {
            switch (slots.reserve(sizeClass, tenant)) {
                case SlotTable.Allocation.Allocated(int slot, long imageId) -> {
                    memory.takeOver(slot, namespaceId);
                    metrics.reserved(sizeClass, slots.slotBytes(slot), lengthBytes);
                    return new Reservation(this, key, namespaceId, slot, imageId, memory.slotRef(slot, lengthBytes));
                }
                case SlotTable.Allocation.Refused(ReserveResult.FullReason reason)
                        when reason == ReserveResult.FullReason.TENANT_QUOTA -> {
                    // The tenant's own images make room, least recently used first; never another's.
                    if (tenantEvictions++ >= MAX_TENANT_EVICTIONS || !index.evictForTenant(tenant, true)) {
                        slots.tenants().refused(slots, tenant);
                        return refuse(reason);
                    }
                }
                case SlotTable.Allocation.Refused(ReserveResult.FullReason reason) -> {
                    // A handed-over victim's slot stays parked until the listener releases it (the
                    // on-evict SSD write), so the evictions after the first MAX - 1 keep no copy:
                    // their slot is free at once. A concurrent reservation may take it first; then
                    // this one evicts again, up to MAX_FREEING_EVICTIONS times.
                    boolean handOver = pressureEvictions < MAX_PRESSURE_EVICTIONS - 1;
                    boolean retry = reason == ReserveResult.FullReason.NO_FREE_SLOT
                            && pressureEvictions < MAX_PRESSURE_EVICTIONS - 1 + MAX_FREEING_EVICTIONS
                            && index.evictForClass(sizeClass, handOver);
                    if (!retry) return refuse(reason);
                    pressureEvictions++;
                }
            }
        }
    }

    /**
     * Makes the reservation's image resident and readable. If the key became resident in the same
     * namespace meanwhile, the resident image stays and the reservation's slot is freed
     * ({@link CommitResult.Duplicate}); an image of the key in another namespace is not affected.
     */
    public CommitResult commit(Reservation reservation) {
        requireOwned(reservation);
        requireOpen();
        if (!reservation.end(Reservation.COMMITTED)) return new CommitResult.NotOpen();
        ResidentImage fresh = imageOf(reservation);
        stageChain(reservation);
        ResidentImage winner = index.insert(pageOf(reservation), fresh, false);
        if (winner == fresh) return new CommitResult.Inserted(fresh.imageId());
        slots.abort(reservation.slot(), reservation.imageId());
        metrics.duplicate();
        return new CommitResult.Duplicate(winner.imageId());
    }

    /**
     * Commits like {@link #commit} and leases the committed image in the same step (the lease is
     * taken inside the insertion, before any eviction the insertion triggers), so a caller that
     * paid for the bytes, like a restore from SSD, keeps them even when W-TinyLFU refuses the
     * newcomer at once. For a duplicate, leases the resident image if it is still there. Neither
     * lease counts as a hit.
     */
    public AcquireResult commitAndAcquire(Reservation reservation) {
        requireOwned(reservation);
        requireOpen();
        if (!reservation.end(Reservation.COMMITTED)) return new AcquireResult.Miss(reservation.key());
        ResidentImage fresh = imageOf(reservation);
        stageChain(reservation);
        ResidentImage winner = index.insert(pageOf(reservation), fresh, true);
        if (winner == fresh) return newLease(reservation.key(), fresh);
        slots.abort(reservation.slot(), reservation.imageId());
        metrics.duplicate();
        return slots.pin(winner.slot(), winner.imageId()) ? newLease(reservation.key(), winner)
                : new AcquireResult.Miss(reservation.key());
    }

    /** Gives the reservation's slot back; false if it was already committed or aborted. */
    public boolean abort(Reservation reservation) {
        requireOwned(reservation);
        if (!reservation.end(Reservation.ABORTED)) return false;
        slots.abort(reservation.slot(), reservation.imageId());
        return true;
    }

    /**
     * Leases {@code key}'s image resident in {@code namespaceId}, or misses. A hit counts as a use for
     * the policy (so does, for a recency policy, a {@link #reserve} answered
     * {@link ReserveResult.AlreadyResident}).
     */
    public AcquireResult acquire(StateKey key, int namespaceId) {
        Objects.requireNonNull(key, "key");
        requireOpen();
        ResidentImage image = index.lookup(new PageKey(namespaceId, key));
        // The image may have been evicted (and its slot reused) since the lookup: pin checks the id.
        if (image == null || !slots.pinUse(image.slot(), image.imageId())) {
            metrics.miss();
            return new AcquireResult.Miss(key);
        }
        return newLease(key, image);
    }

    /**
     * Where {@link #acquireRun} gets its keys: derived on demand, so a run that stops early derives
     * no more. A caller that asks for the same keys again and again (an engine's repeated prompt
     * prefix) may also keep what the tier found for each index: an opaque hint the tier hands back
     * through {@link #remember} and reads with {@link #hint} the next time.
     */
    @FunctionalInterface
    public interface RunKeys {
        /** The key at {@code index} of the caller's arrays. */
        StateKey key(int index);

        /** What the tier found for {@code index} the last time, as given to {@link #remember}; null when nothing. */
        default Object hint(int index) {
            return null;
        }

        /** Keeps {@code found} (null: forget) for the next {@link #hint} of {@code index}. */
        default void remember(int index, Object found) {
        }
    }

    /**
     * {@link #acquire} of consecutive keys with one slot-table lock trip per
     * {@value #RUN_PAGES} pages instead of one per page: for {@code i = from, from + 1, ...} below
     * {@code to}, stores {@code keyOf.key(i)} in {@code keys[i]} and, while the key's image is
     * resident in {@code namespaceId}, a lease on it in {@code leases[i]}. Stops before the first
     * key without such an image (its key is stored, nothing is leased for it and no miss is
     * counted: the caller looks it up on its own, e.g. with {@link #acquire}) and returns its
     * index, or {@code to} when every key was leased. Each lease counts as a hit and a use, as
     * {@link #acquire}'s do.
     *
     * <p>Eviction safety is {@link #acquire}'s: the index is read without the slot-table lock, so
     * an image may be evicted and its slot reused before the pins; each pin checks the slot still
     * holds that image id, and the run stops at the first that does not.
     *
     * <p>Hints: unless the index counts reads (W-TinyLFU's frequency sketch), an image
     * {@code keyOf} remembers for an index is taken without an index probe, as the probe would
     * answer it: the pin checks that its slot still holds that exact image id, which names one
     * insertion of one key in one namespace, so a hint that went stale (evicted, or its slot
     * reused) fails its pin; it is forgotten and that page is probed in the index once, so a key
     * evicted and published again between two requests of the prompt is still found. A probe per
     * page was a cache miss per page: 20 % of the connection thread for a repeated 1,024-page
     * prefix.
     */
    public int acquireRun(RunKeys keyOf, int from, int to, int namespaceId, StateKey[] keys, Lease[] leases) {
        Objects.requireNonNull(keyOf, "keyOf");
        requireOpen();
        int[] runSlots = new int[Math.min(RUN_PAGES, Math.max(0, to - from))];
        long[] runImages = new long[runSlots.length];
        ResidentImage[] images = new ResidentImage[runSlots.length];
        boolean hints = !policy.indexEnforcesBound();
        boolean[] fromHint = new boolean[runSlots.length];
        int probed = -1; // the page whose stale hint was just dropped: its image comes from the index
        int i = from;
        while (i < to) {
            int n = 0;
            boolean stopped = false;
            while (n < runSlots.length && i + n < to) {
                StateKey key = Objects.requireNonNull(keyOf.key(i + n), "key");
                keys[i + n] = key;
                ResidentImage image = hints && i + n != probed
                        && keyOf.hint(i + n) instanceof ResidentImage h && h.namespaceId() == namespaceId ? h : null;
                fromHint[n] = image != null;
                if (image == null) {
                    image = index.lookup(new PageKey(namespaceId, key));
                    if (hints && image != null) keyOf.remember(i + n, image);
                }
                if (image == null) {
                    stopped = true;
                    break;
                }
                images[n] = image;
                runSlots[n] = image.slot();
                runImages[n] = image.imageId();
                n++;
            }
            int pinned = n == 0 ? 0 : slots.pinUseRun(runSlots, runImages, n);
            for (int k = 0; k < pinned; k++) leases[i + k] = newLease(keys[i + k], images[k]);
            if (hints && pinned < n) keyOf.remember(i + pinned, null);
            i += pinned;
            if (pinned < n && fromHint[pinned]) {
                probed = i; // a remembered image that went stale: probe this page once, then go on
                continue;
            }
            if (stopped || pinned < n) return i;
        }
        return to;
    }

    /**
     * {@link Lease#release()} of {@code leases[0..n)} with one slot-table lock trip per
     * {@value #RUN_PAGES} leases instead of one per lease. Null entries and leases already released
     * are skipped (each lease's one-shot end is still the only release that counts); a lease of
     * another tier is released on its own. Returns how many this call released.
     */
    public int releaseAll(Lease[] leases, int n) {
        int[] runSlots = new int[Math.min(RUN_PAGES, Math.max(0, n))];
        long[] runImages = new long[runSlots.length];
        int released = 0;
        int run = 0;
        for (int i = 0; i < n; i++) {
            Lease lease = leases[i];
            if (lease == null) continue;
            if (lease.owner() != this) {
                if (lease.release() == ReleaseResult.RELEASED) released++;
                continue;
            }
            if (!lease.end(Lease.RELEASED)) continue;
            runSlots[run] = lease.slot();
            runImages[run] = lease.imageId();
            released++;
            if (++run == runSlots.length) {
                slots.unpinRun(runSlots, runImages, run);
                run = 0;
            }
        }
        if (run > 0) slots.unpinRun(runSlots, runImages, run);
        return released;
    }

    /**
     * Leases {@code key}'s image in {@code namespaceId} only if it is still resident as {@code imageId}. Unlike
     * {@link #acquire} this is not a use: no hit is counted and the eviction policy does not see
     * it. For internal copiers (the publish pipeline writing a resident image to SSD) that must
     * not make an image look popular.
     */
    public AcquireResult acquireImage(StateKey key, int namespaceId, long imageId) {
        Objects.requireNonNull(key, "key");
        requireOpen();
        ResidentImage image = index.peek(new PageKey(namespaceId, key));
        if (image == null || image.imageId() != imageId || !slots.pin(image.slot(), image.imageId())) {
            return new AcquireResult.Miss(key);
        }
        return newLease(key, image);
    }

    /**
     * A second lease on the image {@code held} pins, valid even if the image was evicted since
     * (its slot cannot be reused while {@code held} is held). Misses when {@code held} was
     * released. Lets several readers of one staged image each own a lease.
     */
    public AcquireResult share(Lease held) {
        Objects.requireNonNull(held, "held");
        if (held.owner() != this) throw new IllegalArgumentException("lease of another DRAM tier: " + held);
        if (!held.isHeld() || !slots.pinHeld(held.slot(), held.imageId())) return new AcquireResult.Miss(held.key());
        return new Lease(this, held.key(), held.namespaceId(), held.slot(), held.imageId(), held.slotRef());
    }

    /**
     * Registers the one listener that is offered the images evicted by the policy, by class
     * pressure or by {@link #evict} (see {@link EvictionListener} for those it is not offered).
     * Call once, before traffic.
     */
    public void setEvictionListener(EvictionListener listener) {
        index.setListener(listener);
    }

    /**
     * True when {@code key} is resident now in any namespace; does not count as a use. Walks the
     * whole index: for operators and tests, never for a client's request (it would tell one
     * namespace about another's pages).
     */
    public boolean contains(StateKey key) {
        return !index.pagesOf(key).isEmpty();
    }

    /** True when {@code key} is resident now in {@code namespaceId}; does not count as a use. */
    public boolean contains(StateKey key, int namespaceId) {
        return index.peek(new PageKey(namespaceId, key)) != null;
    }

    /**
     * The keys resident now, one entry per image (a key resident in two namespaces is listed
     * twice), a weakly consistent copy (for the catalog's resynchronisation after a
     * residency-stream gap: keys inserted or evicted during the copy are also in the stream).
     */
    public List<StateKey> residentKeys() {
        return index.keys();
    }

    /**
     * Removes {@code key}'s image of {@code namespaceId} from the index (its slot waits for its
     * leases); false if absent.
     */
    public boolean evict(StateKey key, int namespaceId) {
        return index.remove(new PageKey(namespaceId, key), ResidentIndex.ANY_IMAGE, DramMetrics.EvictionCause.EXPLICIT, true);
    }

    /**
     * Removes {@code key}'s images of every namespace, as {@link #evict(StateKey, int)} does one;
     * false if none was resident. Walks the whole index: for operators and tests, never for a
     * client's request.
     */
    public boolean evict(StateKey key) {
        boolean removed = false;
        for (PageKey page : index.pagesOf(key)) {
            removed |= index.remove(page, ResidentIndex.ANY_IMAGE, DramMetrics.EvictionCause.EXPLICIT, true);
        }
        return removed;
    }

    /**
     * Holds {@code key}'s image of {@code namespaceId} in DRAM (a HINT PIN): no eviction policy and
     * no class pressure takes it until {@link #releaseHold}; a DROP or an explicit removal still
     * can. Empty when no image of the key is resident in that namespace (another namespace's image
     * of the same key bytes counts as absent) or it is held already. Not a use.
     */
    public Optional<HeldImage> hold(StateKey key, int namespaceId) {
        Objects.requireNonNull(key, "key");
        requireOpen();
        return index.hold(key, namespaceId);
    }

    /** True while {@code held}'s image is resident and still held. */
    public boolean holds(HeldImage held) {
        return slots.holds(held.slot(), held.imageId());
    }

    /** Ends a {@link #hold}; false when the image left the index meanwhile or was released already. */
    public boolean releaseHold(HeldImage held) {
        Objects.requireNonNull(held, "held");
        return index.releaseHold(held);
    }

    /**
     * A client's value hint (HINT RETAIN or DEMOTE) for {@code key}'s image of {@code namespaceId},
     * passed to the eviction policy; false when no such image is resident. A held image is not
     * reordered.
     */
    public boolean hint(StateKey key, int namespaceId, ValueHint value) {
        Objects.requireNonNull(key, "key");
        Objects.requireNonNull(value, "value");
        requireOpen();
        return index.hint(key, namespaceId, value);
    }

    /**
     * Removes {@code key}'s image of {@code namespaceId} from the index (HINT DROP; REMOVED on the
     * residency stream, not offered to the eviction listener); its slot returns to the free list
     * when its last lease ends. False when no such image is resident.
     */
    public boolean drop(StateKey key, int namespaceId) {
        Objects.requireNonNull(key, "key");
        requireOpen();
        return index.drop(key, namespaceId);
    }

    /** Removes every image of {@code namespaceId}; returns how many. Walks the whole index. */
    public int evictNamespace(int namespaceId) {
        return index.removeNamespace(namespaceId);
    }

    /** A consistent snapshot of the byte accounting. */
    public DramUsage usage() {
        return slots.usage();
    }

    /** The tenants this tier charges reservations to. */
    public TenantTable tenants() {
        return slots.tenants().table();
    }

    /** The tenant the image {@code lease} pins was charged to (the SSD writer charges its extent alike). */
    public int tenantOf(Lease lease) {
        if (lease.owner() != this) throw new IllegalArgumentException("lease of another DRAM tier: " + lease);
        return slots.tenants().tenantOf(slots, lease.slot());
    }

    /** The tenant of {@code key}'s resident image {@code imageId} in {@code namespaceId}; {@code TenantTable.UNTRACKED} when it is gone. */
    public int tenantOf(StateKey key, int namespaceId, long imageId) {
        ResidentImage image = index.peek(new PageKey(namespaceId, key));
        return image == null || image.imageId() != imageId ? TenantTable.UNTRACKED : slots.tenants().tenantOf(slots, image.slot());
    }

    /** One row per configured tenant quota, in configuration order: its DRAM figures now. */
    public List<TenantDramUsage> tenantUsage() {
        TenantTable table = slots.tenants().table();
        List<TenantDramUsage> out = new java.util.ArrayList<>(table.size() - 1);
        for (int t = 1; t < table.size(); t++) {
            long[] figures = slots.tenants().figures(slots, t);
            io.orbitkv.core.namespace.TenantQuota q = table.quota(t);
            out.add(new TenantDramUsage(q.namespace().toString(), q.labelText(), figures[0],
                    q.dramBytes() == io.orbitkv.core.namespace.TenantQuota.UNLIMITED ? -1 : q.dramBytes(),
                    q.dramGuaranteedBytes(), figures[1], figures[2]));
        }
        return out;
    }

    /** What a client needs to map the arenas. */
    public ArenaGeometry geometry() {
        return arenas.geometry();
    }

    public DramTierConfig config() {
        return config;
    }

    /** Unmaps the arenas, closes their descriptors and removes the meters. Idempotent. */
    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) return;
        try {
            metrics.close();
        } finally {
            arenas.close();
        }
    }

    /** Runs Caffeine's pending maintenance (read-buffer drain, evictions) now; for tests. */
    void runMaintenance() {
        index.cleanUp();
    }

    /** Slot state table, for tests in this package. */
    SlotTable slots() {
        return slots;
    }

    private static PageKey pageOf(Reservation reservation) {
        return new PageKey(reservation.namespaceId(), reservation.key());
    }

    private static ResidentImage imageOf(Reservation committed) {
        return new ResidentImage(committed.slot(), committed.lengthBytes(), committed.namespaceId(), committed.imageId());
    }

    /**
     * Hands the reservation's {@link ChainLink} to a policy that tracks chains, before the insertion:
     * the parent's slot and image if the parent is resident in the same namespace.
     */
    private void stageChain(Reservation reservation) {
        if (!policy.tracksChains()) return;
        ChainLink link = reservation.chainLink();
        ResidentImage parent = link.parent() == null ? null
                : index.peek(new PageKey(reservation.namespaceId(), link.parent()));
        boolean linked = parent != null;
        int parentSlot = linked ? parent.slot() : -1;
        long parentImage = linked ? parent.imageId() : ResidentIndex.ANY_IMAGE;
        slots.locked(() -> {
            policy.stageChainLocked(slots, reservation.slot(), parentSlot, parentImage, link.first(), link.last());
            return null;
        });
    }

    /** {@link Lease#markNeeded()}: true the first time image {@code imageId} of {@code slot} is marked. */
    boolean markNeeded(int slot, long imageId) {
        return slots.markNeeded(slot, imageId);
    }

    /** Called by {@link Lease#release()} exactly once per lease. */
    void unpin(int slot, long imageId) {
        slots.unpin(slot, imageId);
    }

    private Lease newLease(StateKey key, ResidentImage image) {
        return new Lease(this, key, image.namespaceId(), image.slot(), image.imageId(),
                memory.slotRef(image.slot(), image.lengthBytes()));
    }

    /** The bytes of {@code slot} as {@code namespaceId} wrote them, in whole 4 KiB blocks ({@link SlotClaim#blockSegment}). */
    MemorySegment blockSlice(int namespaceId, int slot, int lengthBytes) {
        return memory.blockSlice(namespaceId, slot, lengthBytes);
    }

    private ReserveResult refuse(ReserveResult.FullReason reason) {
        metrics.reservationFailed(reason);
        return new ReserveResult.Full(reason);
    }

    /**
     * The arenas of {@code namespaceId} (one memfd per class), created on first use; empty when
     * {@code maxArenaNamespaces} namespaces already have arenas. Engines of the namespace are
     * given these and no other.
     */
    public Optional<ArenaGeometry> arenasFor(int namespaceId) {
        return memory.arenasFor(namespaceId);
    }

    /** Slot bytes of {@code namespaceId}'s resident images now (the namespace's share of {@link DramUsage#usedBytes}). */
    public long residentBytes(int namespaceId) {
        return index.residentBytes(namespaceId);
    }

    /** Memory the kernel has allocated to {@code namespaceId}'s arenas, in bytes (headers included). */
    public long allocatedBytes(int namespaceId) {
        return arenas.allocatedBytes(namespaceId);
    }

    private void requireOpen() {
        if (closed.get()) throw new IllegalStateException("DRAM tier is closed");
    }

    private void requireOwned(Reservation reservation) {
        if (reservation.owner() != this) {
            throw new IllegalArgumentException("reservation belongs to another DRAM tier: " + reservation);
        }
    }
}
