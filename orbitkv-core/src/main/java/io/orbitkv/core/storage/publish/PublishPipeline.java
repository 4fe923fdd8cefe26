package io.orbitkv.core.storage.publish;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.binder.BaseUnits;
import io.orbitkv.core.cost.CostObserver;
import io.orbitkv.core.cost.ResourceId;
import io.orbitkv.core.namespace.NamespaceTable;
import io.orbitkv.core.storage.dram.AcquireResult;
import io.orbitkv.core.storage.dram.CommitResult;
import io.orbitkv.core.storage.dram.DramTier;
import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.core.storage.dram.Reservation;
import io.orbitkv.core.storage.dram.ReserveResult;
import io.orbitkv.core.storage.ssd.SsdStore;
import io.orbitkv.core.storage.ssd.WriteResult;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;

import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.LongSupplier;

/**
 * The publish pipeline: seals produced blocks into DRAM, then decides separately whether and
 * when each DRAM-resident block is written to SSD.
 *
 * <p>Owns the bounded seal queue (bytes and entries), the {@link WriteBudget}, the bounded
 * reuse-aware hit table and the set of keys with an SSD write pending. Borrows the
 * {@link DramTier}, the {@link SsdStore} and the {@link SsdIoDispatcher} from their owner
 * (the {@code TieredStore}).
 *
 * <p>Flow: {@link #publish} queues a weak {@link PageSource} (full queue: {@link PublishResult.Busy},
 * counted). {@link #sealQueued} (the owner's sealing thread) takes each block in order, opens
 * its source (gone: dropped, counted), reserves a DRAM slot, copies, commits: a sealed block
 * enters DRAM first. {@link #onCommitted} (also the engine channel's zero-copy commits) then runs
 * SSD admission by policy: {@code write-through} leases the image at once and queues it in the
 * bounded write-through queue ({@code writeLaneOps} images), from which {@link #admitWriteThrough}
 * admits it as soon as the write lane, the queued-bytes bound and the rate allow (the sealer
 * stops sealing while that queue is full, so the seal queue and then {@code publish} push back); {@code on-evict} when DRAM evicts the
 * image ({@link #onEvicted} hands over a lease taken before the slot was freed, and
 * {@link #admitEvicted} admits it); {@code reuse-aware:N} on
 * the N-th DRAM hit after the commit ({@link #onDramHit}). Admission then asks the budget (over
 * rate or queue bytes: skipped, counted, the block stays in DRAM) and queues a write on the
 * dispatcher's write lane. A queued write holds only key + image id (or the eviction lease); at
 * its turn it leases exactly that image, quietly, and writes from the DRAM slot with no copy; if
 * the image is gone the write is dropped (counted).
 *
 * <p>Thread model: {@code publish}, {@code onCommitted} and {@code onDramHit} from any thread;
 * {@code sealQueued} and {@code admitEvicted} from one sealing thread at a time; {@code onEvicted}
 * on DRAM's evicting thread under that key's index lock, so it only queues (bounded). {@code queueLock} guards the seal
 * queue and the budget and is never held while calling another component.
 *
 * <p>Invariants: {@code queuedBytes} is the sum of queued blocks' lengths and at most
 * {@code sealQueueBytes}; every queued block is sealed or dropped exactly once, and its source
 * closed exactly once; every admitted write returns its bytes to the budget exactly once and
 * releases the one lease it took; at most one SSD write per key is pending. Under
 * {@code write-through} the admitted writes never pass {@code writeLaneOps}, so the lane never
 * displaces one ({@code lane_full} is 0), and each write holds its image's lease from the commit
 * to the end of the write, so a sealed block is never lost to eviction ({@code source_gone} is 0):
 * it is written, or counted under exactly one skip, written or dropped reason.
 *
 * <p>Design note: sealing copies into DRAM before any SSD decision because a restore wants DRAM
 * (~10 GB/s per core) and the SSD write (~2-3 GB/s, shared with restores) is optional. Queued
 * writes of {@code reuse-aware:N} do not pin their DRAM slot: 128 queued 2 MiB writes would
 * otherwise hold 256 MiB of arena out of reach of eviction; a write whose image was evicted
 * meanwhile is simply lost, which is the right outcome for a block nobody kept. {@code on-evict}
 * keeps the lease the eviction handed over, its write exists because of the eviction. And
 * {@code write-through} leases from the commit: the policy promises SSD copies of what was
 * sealed, and without the lease a burst of 2,737 sealed pages lost 273 to eviction before their
 * turn ({@code source_gone}) and 12 to lane displacement ({@code lane_full}). The cost is bounded:
 * at most 2 × {@code writeLaneOps} images (queued and admitted) are leased at a time.
 */
public final class PublishPipeline implements AutoCloseable {

    /** Incarnation source for the DRAM copy resource identity: each pipeline is a new resource. */
    private static final java.util.concurrent.atomic.AtomicLong INCARNATIONS = new java.util.concurrent.atomic.AtomicLong();

    /** One block waiting to be sealed; {@code enqueuedNanos} is {@link System#nanoTime()} at publish when cost observations are on, else 0. */
    private record SealRequest(StateKey key, int namespaceId, PageSource source, long enqueuedNanos) {}

    /** An image DRAM evicted and handed over, waiting for SSD admission under {@code on-evict}. */
    private record Evicted(Lease retained, int namespaceId) {}

    /** A write-through image waiting for write room; its lease keeps it from vanishing meanwhile. */
    private record WriteThroughEntry(Lease lease, NamespaceDigest digest) {}

    /** How often the sealer retries write-through entries held back by the write rate. */
    private static final long WRITE_THROUGH_RETRY_NANOS = java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(1);

    /** A reuse-aware candidate: the committed image whose DRAM hits are counted. */
    private record HitCount(int namespaceId, long imageId, int lengthBytes, AtomicInteger hits) {}

    private final DramTier dram;
    private final SsdStore ssd;
    private final SsdIoDispatcher dispatcher;
    private final PublishConfig config;
    private final NamespaceTable namespaces;
    private final LongSupplier nanoClock;
    private final PublishMetrics metrics;
    private final DramCopyObservations copies;
    private final Cache<StateKey, HitCount> hitTable;
    private final Set<StateKey> pendingWrites = ConcurrentHashMap.newKeySet();
    private final java.util.concurrent.atomic.AtomicBoolean closeCalled = new java.util.concurrent.atomic.AtomicBoolean();

    private final ReentrantLock queueLock = new ReentrantLock();
    private final Condition work = queueLock.newCondition();
    /** Signalled when an admitted write finishes (lane room and queued bytes returned). */
    private final Condition writeRoom = queueLock.newCondition();
    // @GuardedBy("queueLock"); at most writeLaneOps entries, each holding a DRAM lease
    private final ArrayDeque<WriteThroughEntry> writeThroughQueue = new ArrayDeque<>();
    /** Writes admitted and not finished (in the dispatcher's lane or in the store). */
    // @GuardedBy("queueLock")
    private int admittedWrites;
    /** Set by {@link #close}: write-through entries are admitted ignoring the rate, within the drain bound. */
    // @GuardedBy("queueLock")
    private boolean draining;
    // @GuardedBy("queueLock")
    private final ArrayDeque<SealRequest> sealQueue = new ArrayDeque<>();
    // @GuardedBy("queueLock"); bounded by writeLaneOps (each entry pins an evicted DRAM slot)
    private final ArrayDeque<Evicted> evictedQueue = new ArrayDeque<>();
    // @GuardedBy("queueLock")
    private long queuedBytes;
    // @GuardedBy("queueLock")
    private final WriteBudget budget;
    // @GuardedBy("queueLock")
    private boolean closed;

    /**
     * @param nanoClock the budget's clock ({@code System::nanoTime} in production; tests drive it)
     */
    public PublishPipeline(DramTier dram, SsdStore ssd, SsdIoDispatcher dispatcher, PublishConfig config,
                           NamespaceTable namespaces, MeterRegistry registry, LongSupplier nanoClock) {
        this(dram, ssd, dispatcher, config, namespaces, registry, nanoClock, CostObserver.disabled());
    }

    /** As above, reporting each sealing copy to {@code observer} as a DRAM copy. */
    public PublishPipeline(DramTier dram, SsdStore ssd, SsdIoDispatcher dispatcher, PublishConfig config,
                           NamespaceTable namespaces, MeterRegistry registry, LongSupplier nanoClock,
                           CostObserver observer) {
        this.copies = new DramCopyObservations(observer,
                new ResourceId("dram:" + dram.config().arenaName(), INCARNATIONS.incrementAndGet()));
        this.dram = Objects.requireNonNull(dram, "dram");
        this.ssd = Objects.requireNonNull(ssd, "ssd");
        this.dispatcher = Objects.requireNonNull(dispatcher, "dispatcher");
        this.config = Objects.requireNonNull(config, "config");
        this.namespaces = Objects.requireNonNull(namespaces, "namespaces");
        this.nanoClock = Objects.requireNonNull(nanoClock, "nanoClock");
        this.budget = new WriteBudget(config.writeBytesPerSecond(), config.writeBurstBytes(),
                config.writeQueueBytes(), nanoClock.getAsLong());
        this.hitTable = Caffeine.newBuilder().maximumSize(config.hitTableEntries()).executor(Runnable::run).build();
        Tags tags = Tags.of("arena", dram.config().arenaName());
        this.metrics = new PublishMetrics(registry, tags);
        metrics.register(Gauge.builder("orbitkv.publish.seal.queue.bytes", this, p -> p.sealQueueBytes())
                .baseUnit(BaseUnits.BYTES).tags(tags).description("bytes waiting to be sealed").register(registry));
        metrics.register(Gauge.builder("orbitkv.publish.seal.queue.depth", this, p -> p.sealQueueDepth())
                .tags(tags).description("blocks waiting to be sealed").register(registry));
        metrics.register(Gauge.builder("orbitkv.publish.ssd.writethrough.queue.depth", this,
                p -> p.writeThroughQueueDepth()).tags(tags)
                .description("sealed blocks (leased) waiting for SSD write room under write-through").register(registry));
        metrics.register(Gauge.builder("orbitkv.publish.ssd.queued.bytes", this, p -> p.writeQueuedBytes())
                .baseUnit(BaseUnits.BYTES).tags(tags).description("bytes admitted for SSD, not yet written")
                .register(registry));
    }

    /** Queues {@code source} to be sealed as {@code key}'s image. Never blocks. */
    public PublishResult publish(StateKey key, int namespaceId, PageSource source) {
        Objects.requireNonNull(key, "key");
        Objects.requireNonNull(source, "source");
        int length = source.lengthBytes();
        if (length <= 0) throw new IllegalArgumentException("lengthBytes must be positive: " + length);
        queueLock.lock();
        try {
            if (closed || queuedBytes + length > config.sealQueueBytes()
                    || sealQueue.size() >= config.sealQueueEntries()) {
                metrics.sealBusy.increment();
                return new PublishResult.Busy();
            }
            sealQueue.addLast(new SealRequest(key, namespaceId, source, copies.enabled() ? System.nanoTime() : 0));
            queuedBytes += length;
            work.signal();
            return new PublishResult.Queued(queuedBytes);
        } finally {
            queueLock.unlock();
        }
    }

    /**
     * Seals up to {@code maxBlocks} queued blocks in order; returns how many were taken. Under
     * {@code write-through} it stops early while the write-through queue is full: the block would
     * have no SSD write room, so it waits in the seal queue (and a full seal queue refuses publishes).
     */
    public int sealQueued(int maxBlocks) {
        int taken = 0;
        while (taken < maxBlocks) {
            SealRequest next;
            admitWriteThrough();
            queueLock.lock();
            try {
                if (writeThroughFull()) return taken;
                next = sealQueue.pollFirst();
                if (next == null) return taken;
                queuedBytes -= next.source().lengthBytes();
            } finally {
                queueLock.unlock();
            }
            taken++;
            seal(next);
        }
        return taken;
    }

    /**
     * Runs SSD admission for the images DRAM handed over on eviction ({@code on-evict}), oldest
     * first; returns how many. Called by the sealing thread, so admission never runs under the
     * evicting thread's index lock.
     */
    public int admitEvicted() {
        int admitted = 0;
        for (;;) {
            Evicted next;
            queueLock.lock();
            try {
                next = evictedQueue.pollFirst();
            } finally {
                queueLock.unlock();
            }
            if (next == null) return admitted;
            Lease lease = next.retained();
            admit(lease.key(), next.namespaceId(), lease.imageId(), lease.lengthBytes(), Optional.of(lease), true);
            admitted++;
        }
    }

    /**
     * Waits up to {@code timeoutNanos} for a block to seal or an evicted image to admit; true
     * when there is work. For the sealing thread.
     */
    public boolean awaitWork(long timeoutNanos) throws InterruptedException {
        queueLock.lock();
        try {
            long remaining = timeoutNanos;
            while (!hasWork() && !closed) {
                if (remaining <= 0) return false;
                // Entries held back by the write rate need a clock, not a signal: retry each millisecond.
                if (!writeThroughQueue.isEmpty()) {
                    work.awaitNanos(Math.min(remaining, WRITE_THROUGH_RETRY_NANOS));
                    return true;
                }
                remaining = work.awaitNanos(remaining);
            }
            return hasWork();
        } finally {
            queueLock.unlock();
        }
    }

    // @GuardedBy("queueLock")
    private boolean hasWork() {
        return (!sealQueue.isEmpty() && !writeThroughFull()) || !evictedQueue.isEmpty();
    }

    // @GuardedBy("queueLock")
    private boolean writeThroughFull() {
        return config.policy() instanceof SsdAdmissionPolicy.WriteThrough
                && writeThroughQueue.size() >= config.writeLaneOps();
    }

    /**
     * Admits queued write-through blocks, oldest first, while the write lane has room
     * ({@code writeLaneOps} admitted writes), the queued-bytes bound and the rate allow (the rate
     * is ignored while {@link #close} drains); returns how many. Any thread; never blocks.
     */
    public int admitWriteThrough() {
        int admitted = 0;
        for (;;) {
            WriteThroughEntry next;
            boolean tooLarge = false;
            queueLock.lock();
            try {
                next = writeThroughQueue.peekFirst();
                if (next == null || admittedWrites >= config.writeLaneOps()) return admitted;
                int length = next.lease().lengthBytes();
                if (length > budget.maxQueuedBytes()) {
                    tooLarge = true; // can never fit the queued-bytes bound: skipped, not waited for
                } else {
                    WriteBudget.Admission a = draining ? budget.tryAdmitIgnoringRate(length)
                            : budget.tryAdmit(length, nanoClock.getAsLong());
                    if (a != WriteBudget.Admission.ADMITTED) return admitted;
                    admittedWrites++;
                }
                writeThroughQueue.pollFirst();
            } finally {
                queueLock.unlock();
            }
            Lease lease = next.lease();
            if (tooLarge) {
                pendingWrites.remove(lease.key());
                skip(PublishMetrics.Skip.QUEUE_FULL, Optional.of(lease));
                continue;
            }
            metrics.admitted.increment();
            submit(new WriteOp(lease.key(), next.digest(), lease.imageId(), lease.lengthBytes(), Optional.of(lease)));
            admitted++;
        }
    }

    /** Sealed blocks waiting (leased) for SSD write room under write-through. */
    public int writeThroughQueueDepth() {
        queueLock.lock();
        try {
            return writeThroughQueue.size();
        } finally {
            queueLock.unlock();
        }
    }

    /**
     * {@code key}'s image {@code imageId} (of {@code namespaceId}, {@code lengthBytes}) was just
     * committed to DRAM, by sealing or by a zero-copy publisher: run SSD admission per policy.
     */
    public void onCommitted(StateKey key, int namespaceId, long imageId, int lengthBytes) {
        switch (config.policy()) {
            case SsdAdmissionPolicy.WriteThrough() -> enqueueWriteThrough(key, namespaceId, imageId);
            case SsdAdmissionPolicy.OnEvict() -> { }
            case SsdAdmissionPolicy.ReuseAware(int ignored) ->
                    hitTable.put(key, new HitCount(namespaceId, imageId, lengthBytes, new AtomicInteger()));
        }
    }

    /** A reader leased {@code lease} from DRAM: counts a hit for {@code reuse-aware:N}. */
    public void onDramHit(Lease lease) {
        if (!(config.policy() instanceof SsdAdmissionPolicy.ReuseAware(int threshold))) return;
        HitCount count = hitTable.getIfPresent(lease.key());
        if (count == null || count.imageId() != lease.imageId()) return;
        if (count.hits().incrementAndGet() == threshold) {
            hitTable.asMap().remove(lease.key(), count);
            admit(lease.key(), count.namespaceId(), count.imageId(), count.lengthBytes(), Optional.empty(), false);
        }
    }

    /**
     * DRAM's {@link io.orbitkv.core.storage.dram.EvictionListener}. Under {@code on-evict} the
     * retained image is queued for {@link #admitEvicted} (the evicting thread holds an index lock,
     * so nothing else happens here) and its lease travels with the write; a full hand-over queue
     * ({@code writeLaneOps} entries) drops it, counted as {@code lane_full}. Under the other
     * policies the lease is released at once.
     */
    public void onEvicted(Lease retained, int namespaceId) {
        switch (config.policy()) {
            case SsdAdmissionPolicy.OnEvict() -> {
                boolean queued;
                queueLock.lock();
                try {
                    queued = !closed && evictedQueue.size() < config.writeLaneOps()
                            && evictedQueue.add(new Evicted(retained, namespaceId));
                    if (queued) work.signal();
                } finally {
                    queueLock.unlock();
                }
                if (!queued) {
                    metrics.writeDropped(PublishMetrics.WriteDrop.LANE_FULL);
                    retained.release();
                }
            }
            case SsdAdmissionPolicy.WriteThrough() -> retained.release();
            case SsdAdmissionPolicy.ReuseAware(int ignored) -> {
                hitTable.invalidate(retained.key());
                retained.release();
            }
        }
    }

    public long sealQueueBytes() {
        queueLock.lock();
        try {
            return queuedBytes;
        } finally {
            queueLock.unlock();
        }
    }

    public int sealQueueDepth() {
        queueLock.lock();
        try {
            return sealQueue.size();
        } finally {
            queueLock.unlock();
        }
    }

    /** Bytes admitted for SSD and not yet written or dropped. */
    public long writeQueuedBytes() {
        queueLock.lock();
        try {
            return budget.queuedBytes();
        } finally {
            queueLock.unlock();
        }
    }

    /**
     * Refuses new blocks, drops (and closes the sources of) queued ones, releases handed-over
     * evicted images, admits the write-through blocks still waiting (ignoring the rate; for at
     * most {@code drainTimeoutNanos}, the rest are dropped as {@code closed}), removes the meters.
     * Stop the sealing thread first, or a block it is sealing may be dropped as {@code closed}.
     * The admitted writes finish in the dispatcher, which its owner drains after this. Idempotent.
     */
    @Override
    public void close() {
        List<SealRequest> dropped = new ArrayList<>();
        List<Evicted> evicted = new ArrayList<>();
        if (!closeCalled.compareAndSet(false, true)) return;
        drainWriteThrough(config.drainTimeoutNanos());
        queueLock.lock();
        try {
            closed = true;
            dropped.addAll(sealQueue);
            sealQueue.clear();
            queuedBytes = 0;
            evicted.addAll(evictedQueue);
            evictedQueue.clear();
            work.signalAll();
        } finally {
            queueLock.unlock();
        }
        for (SealRequest r : dropped) {
            r.source().close();
            metrics.sealDropped(PublishMetrics.SealDrop.CLOSED);
        }
        for (Evicted e : evicted) {
            e.retained().release();
            metrics.writeDropped(PublishMetrics.WriteDrop.CLOSED);
        }
        metrics.close();
    }

    private void drainWriteThrough(long timeoutNanos) {
        List<WriteThroughEntry> left;
        queueLock.lock();
        try {
            draining = true;
        } finally {
            queueLock.unlock();
        }
        long deadline = System.nanoTime() + timeoutNanos;
        for (;;) {
            admitWriteThrough();
            queueLock.lock();
            try {
                long remaining = deadline - System.nanoTime();
                if (writeThroughQueue.isEmpty() || remaining <= 0) {
                    left = new ArrayList<>(writeThroughQueue);
                    writeThroughQueue.clear();
                    closed = true; // no entry is queued after this
                    break;
                }
                writeRoom.awaitNanos(Math.min(remaining, WRITE_THROUGH_RETRY_NANOS * 10));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                left = new ArrayList<>(writeThroughQueue);
                writeThroughQueue.clear();
                closed = true;
                break;
            } finally {
                queueLock.unlock();
            }
        }
        for (WriteThroughEntry e : left) {
            pendingWrites.remove(e.lease().key());
            e.lease().release();
            metrics.writeDropped(PublishMetrics.WriteDrop.CLOSED);
        }
    }

    // ---- sealing ---------------------------------------------------------------------------

    private void seal(SealRequest request) {
        PageSource source = request.source();
        int length = source.lengthBytes();
        long admittedNanos = copies.enabled() ? System.nanoTime() : 0;
        try {
            Optional<MemorySegment> bytes = source.tryOpen();
            if (bytes.isEmpty()) {
                metrics.sealDropped(PublishMetrics.SealDrop.SOURCE_GONE);
                return;
            }
            switch (dram.reserve(request.key(), request.namespaceId(), length)) {
                case ReserveResult.AlreadyResident(long ignored) ->
                        metrics.sealed(PublishMetrics.Sealed.ALREADY_RESIDENT);
                case ReserveResult.Full(ReserveResult.FullReason ignored) ->
                        metrics.sealDropped(PublishMetrics.SealDrop.DRAM_FULL);
                case Reservation reservation -> {
                    long copyStart = copies.enabled() ? System.nanoTime() : 0;
                    MemorySegment.copy(bytes.get(), 0, reservation.segment(), 0, length);
                    if (copies.enabled()) {
                        copies.copied(length, request.enqueuedNanos(), admittedNanos, copyStart, System.nanoTime());
                    }
                    commit(reservation);
                }
            }
        } finally {
            source.close();
        }
    }

    /**
     * Commits {@code reservation} (a sealed copy, or an engine's zero-copy write), counts the block
     * as sealed (a new image: {@code inserted} and its bytes under {@code tier=dram}; else
     * {@code duplicate}), and runs SSD admission for a new image. Both publish paths end here, so
     * they count alike. Under {@code write-through} the image is leased inside the
     * insertion ({@link DramTier#commitAndAcquire}): W-TinyLFU may refuse a newcomer at once, and
     * a lease taken after the commit came too late for 112 of a burst of 120 sealed blocks into a
     * 16-slot tier (all {@code source_gone}, on neither tier).
     */
    public CommitResult commitAndAdmit(Reservation reservation) {
        CommitResult result = commitAndAdmitUncounted(reservation);
        switch (result) {
            case CommitResult.Inserted(long ignored) -> metrics.inserted(reservation.lengthBytes());
            case CommitResult.Duplicate(long ignored) -> metrics.sealed(PublishMetrics.Sealed.DUPLICATE);
            case CommitResult.NotOpen() -> { }
        }
        return result;
    }

    private CommitResult commitAndAdmitUncounted(Reservation reservation) {
        if (!(config.policy() instanceof SsdAdmissionPolicy.WriteThrough)) {
            CommitResult result = dram.commit(reservation);
            if (result instanceof CommitResult.Inserted(long imageId)) {
                onCommitted(reservation.key(), reservation.namespaceId(), imageId, reservation.lengthBytes());
            }
            return result;
        }
        if (!reservation.isOpen()) return new CommitResult.NotOpen();
        return switch (dram.commitAndAcquire(reservation)) {
            case Lease lease when lease.imageId() == reservation.imageId() -> {
                enqueueWriteThrough(lease);
                yield new CommitResult.Inserted(lease.imageId());
            }
            case Lease lease -> {
                long resident = lease.imageId();
                lease.release();
                yield new CommitResult.Duplicate(resident);
            }
            // A duplicate whose resident image left between the insertion attempt and the lease.
            case AcquireResult.Miss ignored -> new CommitResult.Duplicate(0);
        };
    }

    private void commit(Reservation reservation) {
        if (commitAndAdmit(reservation) instanceof CommitResult.NotOpen) {
            throw new IllegalStateException("the pipeline's own reservation was closed: " + reservation);
        }
    }

    // ---- SSD admission ---------------------------------------------------------------------

    /**
     * Write-through: leases the just-committed image and queues it for {@link #admitWriteThrough}.
     * A full queue (only zero-copy commits can meet one; the sealer waits for room) skips it as
     * {@code queue_full}, and the block stays in DRAM only.
     */
    private void enqueueWriteThrough(StateKey key, int namespaceId, long imageId) {
        Optional<NamespaceDigest> digest = namespaces.digest(namespaceId);
        if (digest.isEmpty()) {
            skip(PublishMetrics.Skip.UNKNOWN_NAMESPACE, Optional.empty());
            return;
        }
        if (ssd.contains(key, digest.get()) || pendingWrites.contains(key)) {
            skip(PublishMetrics.Skip.ALREADY_STORED, Optional.empty());
            return;
        }
        if (!(dram.acquireImage(key, imageId) instanceof Lease lease)) {
            // Evicted (or displaced) between its commit and this call: nothing is left to write.
            metrics.writeDropped(PublishMetrics.WriteDrop.SOURCE_GONE);
            return;
        }
        if (lease.namespaceId() != namespaceId) {
            lease.release();
            skip(PublishMetrics.Skip.UNKNOWN_NAMESPACE, Optional.empty());
            return;
        }
        enqueueWriteThrough(lease);
    }

    /** As above with the image's lease already taken; the lease goes with the write, or back. */
    private void enqueueWriteThrough(Lease lease) {
        StateKey key = lease.key();
        Optional<NamespaceDigest> digest = namespaces.digest(lease.namespaceId());
        if (digest.isEmpty()) {
            skip(PublishMetrics.Skip.UNKNOWN_NAMESPACE, Optional.of(lease));
            return;
        }
        if (ssd.contains(key, digest.get()) || !pendingWrites.add(key)) {
            skip(PublishMetrics.Skip.ALREADY_STORED, Optional.of(lease));
            return;
        }
        boolean queued;
        boolean isClosed;
        queueLock.lock();
        try {
            isClosed = closed;
            queued = !closed && writeThroughQueue.size() < config.writeLaneOps();
            if (queued) {
                writeThroughQueue.addLast(new WriteThroughEntry(lease, digest.get()));
                work.signal();
            }
        } finally {
            queueLock.unlock();
        }
        if (!queued) {
            pendingWrites.remove(key);
            lease.release();
            if (isClosed) metrics.writeDropped(PublishMetrics.WriteDrop.CLOSED);
            else metrics.skipped(PublishMetrics.Skip.QUEUE_FULL);
            return;
        }
        admitWriteThrough();
    }

    /**
     * @param evicted DRAM is evicting the image: an SSD copy in the ring's oldest
     *                {@code ssdRefreshFraction} is written again instead of skipped (the new
     *                generation replaces it in the index), so a page read back and used again is
     *                not overwritten by the ring while it is still in use
     */
    private void admit(StateKey key, int namespaceId, long imageId, int lengthBytes, Optional<Lease> retained,
                       boolean evicted) {
        Optional<NamespaceDigest> digest = namespaces.digest(namespaceId);
        if (digest.isEmpty()) {
            skip(PublishMetrics.Skip.UNKNOWN_NAMESPACE, retained);
            return;
        }
        boolean refresh = false;
        if (ssd.contains(key, digest.get())) {
            refresh = evicted && config.ssdRefreshFraction() > 0
                    && ssd.isAgeing(key, digest.get(), config.ssdRefreshFraction());
            if (!refresh) {
                skip(PublishMetrics.Skip.ALREADY_STORED, retained);
                return;
            }
        }
        if (!pendingWrites.add(key)) {
            skip(PublishMetrics.Skip.ALREADY_STORED, retained);
            return;
        }
        WriteBudget.Admission admission;
        queueLock.lock();
        try {
            admission = budget.tryAdmit(lengthBytes, nanoClock.getAsLong());
            if (admission == WriteBudget.Admission.ADMITTED) admittedWrites++;
        } finally {
            queueLock.unlock();
        }
        switch (admission) {
            case OVER_RATE -> {
                pendingWrites.remove(key);
                skip(PublishMetrics.Skip.OVER_RATE, retained);
            }
            case QUEUE_FULL -> {
                pendingWrites.remove(key);
                skip(PublishMetrics.Skip.QUEUE_FULL, retained);
            }
            case ADMITTED -> {
                metrics.admitted.increment();
                if (refresh) metrics.refreshed.increment();
                submit(new WriteOp(key, digest.get(), imageId, lengthBytes, retained));
            }
        }
    }

    private void submit(WriteOp op) {
        switch (dispatcher.submitWrite(op)) {
            case QUEUED, QUEUED_DISPLACING_OLDEST -> { }
            case CLOSED -> op.drop(IoOp.DropReason.CLOSED);
        }
    }

    private void skip(PublishMetrics.Skip reason, Optional<Lease> retained) {
        metrics.skipped(reason);
        retained.ifPresent(Lease::release);
    }

    /** A queued SSD write: key + image id, and the eviction lease under {@code on-evict}. */
    private final class WriteOp implements IoOp {
        private final StateKey key;
        private final NamespaceDigest namespace;
        private final long imageId;
        private final int lengthBytes;
        private final Optional<Lease> retained;
        private final AtomicInteger finished = new AtomicInteger();

        WriteOp(StateKey key, NamespaceDigest namespace, long imageId, int lengthBytes, Optional<Lease> retained) {
            this.key = key;
            this.namespace = namespace;
            this.imageId = imageId;
            this.lengthBytes = lengthBytes;
            this.retained = retained;
        }

        @Override
        public CompletableFuture<?> start() {
            Optional<Lease> lease = retained.isPresent() ? retained : leaseImage();
            if (lease.isEmpty()) {
                metrics.writeDropped(PublishMetrics.WriteDrop.SOURCE_GONE);
                finish();
                return CompletableFuture.completedFuture(null);
            }
            Lease held = lease.get();
            CompletableFuture<WriteResult> write;
            try {
                write = ssd.write(namespace, key, held.blockSegment(), lengthBytes);
            } catch (RuntimeException e) {
                held.release();
                finish();
                throw e;
            }
            return write.whenComplete((result, failure) -> {
                held.release();
                PublishMetrics.Written written = failure != null ? PublishMetrics.Written.FAILED : outcome(result);
                if (written == PublishMetrics.Written.COMMITTED) metrics.committed(lengthBytes);
                else metrics.written(written);
                finish();
            });
        }

        @Override
        public void drop(DropReason reason) {
            retained.ifPresent(Lease::release);
            metrics.writeDropped(switch (reason) {
                case LANE_FULL -> PublishMetrics.WriteDrop.LANE_FULL;
                case CLOSED -> PublishMetrics.WriteDrop.CLOSED;
            });
            finish();
        }

        private Optional<Lease> leaseImage() {
            return switch (dram.acquireImage(key, imageId)) {
                case Lease l -> Optional.of(l);
                case AcquireResult.Miss ignored -> Optional.empty();
            };
        }

        private void finish() {
            if (finished.getAndIncrement() != 0) throw new IllegalStateException("write finished twice: " + key);
            pendingWrites.remove(key);
            queueLock.lock();
            try {
                budget.onDequeued(lengthBytes);
                admittedWrites--;
                writeRoom.signalAll();
            } finally {
                queueLock.unlock();
            }
            // The lane has room again: the next write-through block need not wait for the sealer.
            if (config.policy() instanceof SsdAdmissionPolicy.WriteThrough) admitWriteThrough();
        }
    }

    private static PublishMetrics.Written outcome(WriteResult result) {
        return switch (result) {
            case WriteResult.Committed ignored -> PublishMetrics.Written.COMMITTED;
            case WriteResult.Busy ignored -> PublishMetrics.Written.BUSY;
            case WriteResult.NoSpace ignored -> PublishMetrics.Written.NO_SPACE;
            case WriteResult.RingFull ignored -> PublishMetrics.Written.RING_FULL;
            case WriteResult.Failed ignored -> PublishMetrics.Written.FAILED;
        };
    }

}
