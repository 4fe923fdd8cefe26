package io.orbitkv.core.storage;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.orbitkv.core.namespace.NamespaceTable;
import io.orbitkv.core.storage.dram.AcquireResult;
import io.orbitkv.core.storage.dram.DramTier;
import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.core.storage.dram.PageKey;
import io.orbitkv.core.storage.dram.Reservation;
import io.orbitkv.core.storage.dram.ReserveResult;
import io.orbitkv.core.storage.publish.PublishPipeline;
import io.orbitkv.core.storage.publish.SsdIoDispatcher;
import io.orbitkv.core.storage.ssd.Pin;
import io.orbitkv.core.storage.ssd.ReadResult;
import io.orbitkv.core.storage.ssd.SsdStore;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Function;

/**
 * The {@link TieredStore}'s stagings: bringing a key's image from SSD into a fresh DRAM slot and
 * leasing it, with every concurrent staging of a key sharing one backing read.
 *
 * <p>Owns the bounded table of in-flight stagings ({@link PageKey}, the namespace id and key, →
 * the one backing SSD read, a
 * {@link StagingRead}, that every concurrent staging of that key shares), the staging queue, the
 * parked stagings and the {@code orbitkv.tiered.stage*} meters. Borrows the {@link DramTier}, the {@link SsdStore}, the
 * {@link SsdIoDispatcher} (reads go on its read lane) and the {@link PublishPipeline} (a DRAM hit
 * is a use for {@code reuse-aware:N}) from the store.
 *
 * <p>Thread model: all methods are thread-safe and never block on I/O; a staging completes its
 * future on an SSD worker thread (or at once for a DRAM hit or a refusal). {@code stageLock} guards
 * the permits, the queue and the parked stagings and is never held while calling another
 * component; one thread at a time drains the queue ({@link #drainWaiting}).
 *
 * <p>Invariants: at most {@code maxInflightStages} keys are being staged and each has exactly
 * one backing read; a staging of a new key beyond that waits, first come first served, in the
 * bounded staging queue ({@code maxQueuedStages} keys) and starts when a staging finishes, so a
 * page on SSD is refused (Busy) only past both bounds; a staging's SSD pin is released and its
 * DRAM reservation committed or aborted exactly once, whatever the read returned; only a
 * {@link ReadResult.Served} read is committed, so a corrupt extent is never served; every caller
 * of a successful staging gets its own lease; a staging finds, reads and leases only images and
 * extents of its own namespace (the same key bytes in another namespace are another page).
 *
 * <p>Design note: staging reads with {@code O_DIRECT} straight into the reserved DRAM slot (slots
 * are 4 KiB aligned and padded to 4 KiB, {@link Reservation#blockSegment()}), so a 2 MiB restore
 * costs one device transfer and no CPU copy (a bounce copy costs ~0.2 ms per 2 MiB at 10 GB/s).
 * Sharing one read per key matters because a popular prefix's blocks are requested by several
 * sessions at once right after an eviction; without the table each would reserve its own slot
 * and read the same bytes again, and only one commit would win. A key past the table waits in
 * the queue instead of being refused: waiting costs it one table turn (one SSD read, 0.1-1 ms),
 * refusing costs it a recomputation (docs/performance.md, "Storage class notes").
 */
final class StagingTable {

    /** Counted staging outcomes ({@code orbitkv.tiered.stage}, tag {@code result}). */
    private enum StageCount { DRAM_HIT, SSD_READ, SHARED_READ, MISS, BUSY }

    /** A staging of a new key waiting for a table entry; {@code caller} completes like a direct staging's. */
    private record Waiting(PageKey key, CompletableFuture<StageResult> caller) {}

    /** A staging whose DRAM reservation met the reserved-bytes budget; it keeps its table entry and retries. */
    private record Parked(PageKey key, Inflight inflight) {}

    /**
     * One staging in flight. {@code outcome} completes with the shared result (holding the anchor
     * lease) so that each caller takes its own lease from the anchor; {@code settled} completes
     * after the anchor is released, and callers' futures complete only then, so a caller that
     * sees its result never observes the anchor still counted as a lease.
     */
    private record Inflight(CompletableFuture<StageResult> outcome, CompletableFuture<Void> settled) {
        Inflight() {
            this(new CompletableFuture<>(), new CompletableFuture<>());
        }

        CompletableFuture<StageResult> forCaller(Function<StageResult, StageResult> ownLease) {
            return outcome.thenApply(ownLease).thenCombine(settled, (mine, ignored) -> mine);
        }
    }

    private final int maxInflightStages;
    private final int maxQueuedStages;
    private final NamespaceTable namespaces;
    private final DramTier dram;
    private final SsdStore ssd;
    private final SsdIoDispatcher dispatcher;
    private final PublishPipeline pipeline;
    private final ConcurrentHashMap<PageKey, Inflight> stagings = new ConcurrentHashMap<>();
    private final ReentrantLock stageLock = new ReentrantLock();
    /** Table entries taken: each staging in {@link #stagings} holds one; at most {@code maxInflightStages}. */
    // @GuardedBy("stageLock")
    private int stagePermits;
    // @GuardedBy("stageLock"); at most maxQueuedStages
    private final ArrayDeque<Waiting> waiting = new ArrayDeque<>();
    /** Work-in-progress count of {@link #drainWaiting}: one thread drains, the others leave it a pass. */
    private final AtomicInteger drainPasses = new AtomicInteger();
    // @GuardedBy("stageLock"); each holds its table entry, so at most maxInflightStages
    private final ArrayDeque<Parked> parked = new ArrayDeque<>();
    /** Stagings finished since the parked ones were last retried: one retry each. */
    // @GuardedBy("stageLock")
    private int parkedRetries;
    private final AtomicBoolean closed = new AtomicBoolean();
    private final MeterRegistry registry;
    private final List<Meter> meters = new ArrayList<>();
    private final Map<StageCount, Counter> stageCounts = new EnumMap<>(StageCount.class);
    private final Counter stagesQueued;
    private final Counter stagesParked;

    StagingTable(TieredStoreConfig config, NamespaceTable namespaces, DramTier dram, SsdStore ssd,
                 SsdIoDispatcher dispatcher, PublishPipeline pipeline, MeterRegistry registry) {
        this.maxInflightStages = config.maxInflightStages();
        this.maxQueuedStages = config.maxQueuedStages();
        this.namespaces = namespaces;
        this.dram = dram;
        this.ssd = ssd;
        this.dispatcher = dispatcher;
        this.pipeline = pipeline;
        this.registry = registry;
        Tags tags = Tags.of("arena", config.dram().arenaName());
        for (StageCount c : StageCount.values()) {
            Counter counter = Counter.builder("orbitkv.tiered.stage").tags(tags)
                    .tag("result", c.name().toLowerCase(Locale.ROOT)).description("stagings by outcome")
                    .register(registry);
            meters.add(counter);
            stageCounts.put(c, counter);
        }
        meters.add(Gauge.builder("orbitkv.tiered.stage.inflight", stagings, Map::size).tags(tags)
                .description("keys being staged from SSD").register(registry));
        meters.add(Gauge.builder("orbitkv.tiered.stage.queue.depth", this, StagingTable::queuedStagings).tags(tags)
                .description("stagings waiting for an in-flight table entry").register(registry));
        stagesQueued = Counter.builder("orbitkv.tiered.stage.queued").tags(tags)
                .description("stagings that waited for an in-flight table entry").register(registry);
        meters.add(stagesQueued);
        stagesParked = Counter.builder("orbitkv.tiered.stage.parked").tags(tags)
                .description("stagings that waited for DRAM reserved bytes held by other stagings").register(registry);
        meters.add(stagesParked);
    }

    /**
     * A DRAM lease on {@code stateKey}'s image in {@code namespaceId}, reading it from SSD (its
     * extent of that namespace) into a fresh DRAM slot if needed.
     * Concurrent stagings of one key share one backing read; each caller gets its own lease.
     * With {@code maxInflightStages} keys in flight a new key waits in the staging queue; only a
     * full queue ({@code maxQueuedStages}) answers {@link StageResult.BusyReason#INFLIGHT_TABLE_FULL}.
     */
    CompletableFuture<StageResult> stage(StateKey stateKey, int namespaceId) {
        PageKey key = new PageKey(namespaceId, Objects.requireNonNull(stateKey, "key"));
        if (closed.get()) return CompletableFuture.completedFuture(new StageResult.Miss(key.key(), StageResult.MissReason.CLOSED));
        if (dram.acquire(key.key(), key.namespaceId()) instanceof Lease lease) {
            pipeline.onDramHit(lease);
            return completed(new StageResult.Staged(lease, StageResult.Source.DRAM_HIT));
        }
        Inflight existing = stagings.get(key);
        if (existing != null) return existing.forCaller(r -> leaseFor(key, r, StageResult.Source.SHARED_READ));
        Waiting queued;
        stageLock.lock();
        try {
            if (waiting.isEmpty() && stagePermits < maxInflightStages) {
                stagePermits++;
                queued = null;
            } else if (waiting.size() < maxQueuedStages && !closed.get()) {
                queued = new Waiting(key, new CompletableFuture<>());
                waiting.addLast(queued);
                stagesQueued.increment();
            } else {
                return completed(new StageResult.Busy(StageResult.BusyReason.INFLIGHT_TABLE_FULL));
            }
        } finally {
            stageLock.unlock();
        }
        if (queued == null) return stageHoldingPermit(key);
        drainWaiting(); // a staging may have finished between the check above and the queueing
        return queued.caller();
    }

    /** Stagings waiting for an in-flight table entry. */
    int queuedStagings() {
        stageLock.lock();
        try {
            return waiting.size();
        } finally {
            stageLock.unlock();
        }
    }

    /**
     * Stages {@code key} with a table entry already taken by this call: the entry goes with the
     * new in-flight staging, or back at once (a DRAM hit, or another staging of the key won).
     */
    private CompletableFuture<StageResult> stageHoldingPermit(PageKey key) {
        if (dram.acquire(key.key(), key.namespaceId()) instanceof Lease lease) {
            releasePermit();
            pipeline.onDramHit(lease);
            return completed(new StageResult.Staged(lease, StageResult.Source.DRAM_HIT));
        }
        Inflight mine = new Inflight();
        Inflight existing = stagings.putIfAbsent(key, mine);
        if (existing != null) {
            releasePermit();
            return existing.forCaller(r -> leaseFor(key, r, StageResult.Source.SHARED_READ));
        }
        CompletableFuture<StageResult> mineForCaller =
                mine.forCaller(r -> leaseFor(key, r, StageResult.Source.SSD_READ));
        startStaging(key, mine);
        return mineForCaller;
    }

    private void releasePermit() {
        stageLock.lock();
        try {
            stagePermits--;
            if (!parked.isEmpty()) parkedRetries++;
        } finally {
            stageLock.unlock();
        }
        drainWaiting();
    }

    /**
     * Parks a staging refused DRAM's reserved-bytes budget while another staging (not parked) is
     * reading: that one's commit returns reserved bytes, and each finish retries one parked staging.
     * False (the caller answers Busy) when no other staging is reading, so the budget is held by
     * publishes and no finish of ours is coming.
     */
    private boolean park(PageKey key, Inflight inflight) {
        stageLock.lock();
        try {
            if (closed.get() || stagePermits - parked.size() - 1 <= 0) return false;
            parked.addLast(new Parked(key, inflight));
            stagesParked.increment();
        } finally {
            stageLock.unlock();
        }
        drainWaiting(); // a staging may have finished meanwhile
        return true;
    }

    /**
     * Retries parked stagings (one per staging finished since) and then starts waiting ones,
     * oldest first, while table entries are free. One thread drains at a time (a staging that
     * finishes synchronously inside the loop only leaves a pass), so a queue of 4,096 keys that
     * all miss does not recurse 4,096 frames deep.
     */
    private void drainWaiting() {
        if (drainPasses.getAndIncrement() != 0) return;
        do {
            for (;;) {
                Parked retry;
                stageLock.lock();
                try {
                    retry = parkedRetries > 0 ? parked.pollFirst() : null;
                    if (retry != null) parkedRetries--;
                    else parkedRetries = 0;
                } finally {
                    stageLock.unlock();
                }
                if (retry == null) break;
                if (closed.get()) finish(retry.key(), retry.inflight(), new StageResult.Miss(retry.key().key(), StageResult.MissReason.CLOSED));
                else startStaging(retry.key(), retry.inflight());
            }
            for (;;) {
                Waiting next;
                boolean refuse;
                stageLock.lock();
                try {
                    if (waiting.isEmpty() || stagePermits >= maxInflightStages) break;
                    next = waiting.pollFirst();
                    refuse = closed.get();
                    if (!refuse) stagePermits++;
                } finally {
                    stageLock.unlock();
                }
                if (refuse) {
                    next.caller().complete(new StageResult.Miss(next.key().key(), StageResult.MissReason.CLOSED));
                    continue;
                }
                Waiting started = next;
                stageHoldingPermit(started.key()).whenComplete((result, failure) -> started.caller().complete(
                        failure == null ? result : new StageResult.Miss(started.key().key(), StageResult.MissReason.IO_ERROR)));
            }
        } while (drainPasses.decrementAndGet() != 0);
    }

    /** Keys being staged now. */
    int inflight() {
        return stagings.size();
    }

    /**
     * Refuses new stagings and completes the waiting and parked ones as {@code CLOSED} misses;
     * stagings already reading finish by themselves (the dispatcher drains or drops their reads).
     */
    void close() {
        if (!closed.compareAndSet(false, true)) return;
        List<Waiting> refused;
        List<Parked> unparked;
        stageLock.lock();
        try {
            refused = List.copyOf(waiting);
            waiting.clear();
            unparked = List.copyOf(parked);
            parked.clear();
        } finally {
            stageLock.unlock();
        }
        for (Waiting w : refused) w.caller().complete(new StageResult.Miss(w.key().key(), StageResult.MissReason.CLOSED));
        for (Parked p : unparked) finish(p.key(), p.inflight(), new StageResult.Miss(p.key().key(), StageResult.MissReason.CLOSED));
    }

    /** Removes the staging meters (after the store's last staging finished or was dropped). */
    void removeMeters() {
        for (Meter m : meters) registry.remove(m);
    }

    // ---- one staging ----------------------------------------------------------------------

    private void startStaging(PageKey key, Inflight inflight) {
        Optional<NamespaceDigest> namespace = namespaces.digest(key.namespaceId());
        if (namespace.isEmpty()) {
            finish(key, inflight, new StageResult.Miss(key.key(), StageResult.MissReason.UNKNOWN_NAMESPACE));
            return;
        }
        if (!(ssd.pin(key.key(), namespace.get()) instanceof Pin pin)) {
            finish(key, inflight, new StageResult.Miss(key.key(), StageResult.MissReason.NOT_FOUND));
            return;
        }
        switch (dram.reserve(key.key(), key.namespaceId(), pin.payloadBytes())) {
            case ReserveResult.AlreadyResident(long imageId) -> {
                ssd.unpin(pin);
                finish(key, inflight, leaseImage(key, imageId, StageResult.Source.DRAM_HIT));
            }
            case ReserveResult.Full(ReserveResult.FullReason reason) -> {
                ssd.unpin(pin);
                if (reason == ReserveResult.FullReason.RESERVED_BUDGET && park(key, inflight)) return;
                finish(key, inflight, new StageResult.Busy(StageResult.BusyReason.DRAM_FULL));
            }
            case Reservation reservation -> {
                StagingRead op = new StagingRead(key.key(), pin, reservation, ssd, dram,
                        outcome -> finish(key, inflight, outcome));
                switch (dispatcher.submitRead(op)) {
                    case QUEUED -> { }
                    case LANE_FULL -> op.abandon(new StageResult.Busy(StageResult.BusyReason.READ_LANE_FULL));
                    case CLOSED -> op.abandon(new StageResult.Miss(key.key(), StageResult.MissReason.CLOSED));
                }
            }
        }
    }

    private StageResult leaseImage(PageKey key, long imageId, StageResult.Source source) {
        return switch (dram.acquireImage(key.key(), key.namespaceId(), imageId)) {
            case Lease lease -> new StageResult.Staged(lease, source);
            case AcquireResult.Miss ignored -> new StageResult.Miss(key.key(), StageResult.MissReason.EVICTED);
        };
    }

    /**
     * Publishes the backing read's outcome: leaves the table first (later stagings start afresh
     * or hit DRAM), completes the shared future (its dependents take their own leases while the
     * anchor lease is still held), then releases the anchor, and only then lets the callers'
     * futures complete ({@link Inflight#settled}).
     */
    private void finish(PageKey key, Inflight inflight, StageResult outcome) {
        stagings.remove(key, inflight);
        try {
            inflight.outcome().complete(outcome);
            if (outcome instanceof StageResult.Staged(Lease anchor, StageResult.Source ignored)) anchor.release();
        } finally {
            inflight.settled().complete(null);
            releasePermit();
        }
    }

    /** Turns the shared outcome into this caller's own result (its own lease, if staged). */
    private StageResult leaseFor(PageKey key, StageResult shared, StageResult.Source source) {
        StageResult mine = switch (shared) {
            case StageResult.Staged(Lease anchor, StageResult.Source anchorSource) -> {
                StageResult.Source own = anchorSource == StageResult.Source.DRAM_HIT ? anchorSource : source;
                if (dram.share(anchor) instanceof Lease lease) yield new StageResult.Staged(lease, own);
                // The anchor was already released (this caller joined just before it finished).
                yield dram.acquire(key.key(), key.namespaceId()) instanceof Lease lease
                        ? new StageResult.Staged(lease, StageResult.Source.DRAM_HIT)
                        : new StageResult.Miss(key.key(), StageResult.MissReason.EVICTED);
            }
            case StageResult.Miss miss -> miss;
            case StageResult.Busy busy -> busy;
        };
        count(mine);
        return mine;
    }

    private CompletableFuture<StageResult> completed(StageResult result) {
        count(result);
        return CompletableFuture.completedFuture(result);
    }

    private void count(StageResult result) {
        StageCount c = switch (result) {
            case StageResult.Staged(Lease ignored, StageResult.Source source) -> switch (source) {
                case DRAM_HIT -> StageCount.DRAM_HIT;
                case SSD_READ -> StageCount.SSD_READ;
                case SHARED_READ -> StageCount.SHARED_READ;
                case PEER_READ -> throw new IllegalStateException("the store never stages from a peer: " + result);
            };
            case StageResult.Miss ignored -> StageCount.MISS;
            case StageResult.Busy ignored -> StageCount.BUSY;
        };
        stageCounts.get(c).increment();
    }
}
