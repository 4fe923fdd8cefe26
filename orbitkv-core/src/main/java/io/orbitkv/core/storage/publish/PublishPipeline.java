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
 * SSD admission by policy: {@code write-through} at once; {@code on-evict} when DRAM evicts the
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
 * releases the one lease it took; at most one SSD write per key is pending.
 *
 * <p>Design note: sealing copies into DRAM before any SSD decision because a restore wants DRAM
 * (~10 GB/s per core) and the SSD write (~2-3 GB/s, shared with restores) is optional. Queued
 * writes do not pin their DRAM slot: 128 queued 2 MiB writes would otherwise hold 256 MiB of
 * arena out of reach of eviction; a write whose image was evicted meanwhile is simply lost,
 * which is the right outcome for a block nobody kept. {@code on-evict} is the exception: its
 * write exists because of the eviction, so it keeps the lease the eviction handed over.
 */
public final class PublishPipeline implements AutoCloseable {

    /** Incarnation source for the DRAM copy resource identity: each pipeline is a new resource. */
    private static final java.util.concurrent.atomic.AtomicLong INCARNATIONS = new java.util.concurrent.atomic.AtomicLong();

    /** One block waiting to be sealed; {@code enqueuedNanos} is {@link System#nanoTime()} at publish when cost observations are on, else 0. */
    private record SealRequest(StateKey key, int namespaceId, PageSource source, long enqueuedNanos) {}

    /** An image DRAM evicted and handed over, waiting for SSD admission under {@code on-evict}. */
    private record Evicted(Lease retained, int namespaceId) {}

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

    private final ReentrantLock queueLock = new ReentrantLock();
    private final Condition work = queueLock.newCondition();
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

    /** Seals up to {@code maxBlocks} queued blocks in order; returns how many were taken. */
    public int sealQueued(int maxBlocks) {
        int taken = 0;
        while (taken < maxBlocks) {
            SealRequest next;
            queueLock.lock();
            try {
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
            admit(lease.key(), next.namespaceId(), lease.imageId(), lease.lengthBytes(), Optional.of(lease));
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
            while (sealQueue.isEmpty() && evictedQueue.isEmpty() && !closed) {
                if (remaining <= 0) return false;
                remaining = work.awaitNanos(remaining);
            }
            return !sealQueue.isEmpty() || !evictedQueue.isEmpty();
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
            case SsdAdmissionPolicy.WriteThrough() -> admit(key, namespaceId, imageId, lengthBytes, Optional.empty());
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
            admit(lease.key(), count.namespaceId(), count.imageId(), count.lengthBytes(), Optional.empty());
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
     * evicted images, removes the meters.
     */
    @Override
    public void close() {
        List<SealRequest> dropped = new ArrayList<>();
        List<Evicted> evicted = new ArrayList<>();
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
                    commit(reservation, request.namespaceId());
                }
            }
        } finally {
            source.close();
        }
    }

    private void commit(Reservation reservation, int namespaceId) {
        switch (dram.commit(reservation)) {
            case CommitResult.Inserted(long imageId) -> {
                metrics.inserted(reservation.lengthBytes());
                onCommitted(reservation.key(), namespaceId, imageId, reservation.lengthBytes());
            }
            case CommitResult.Duplicate(long ignored) -> metrics.sealed(PublishMetrics.Sealed.DUPLICATE);
            case CommitResult.NotOpen() ->
                    throw new IllegalStateException("the pipeline's own reservation was closed: " + reservation);
        }
    }

    // ---- SSD admission ---------------------------------------------------------------------

    private void admit(StateKey key, int namespaceId, long imageId, int lengthBytes, Optional<Lease> retained) {
        Optional<NamespaceDigest> digest = namespaces.digest(namespaceId);
        if (digest.isEmpty()) {
            skip(PublishMetrics.Skip.UNKNOWN_NAMESPACE, retained);
            return;
        }
        if (ssd.contains(key, digest.get()) || !pendingWrites.add(key)) {
            skip(PublishMetrics.Skip.ALREADY_STORED, retained);
            return;
        }
        WriteBudget.Admission admission;
        queueLock.lock();
        try {
            admission = budget.tryAdmit(lengthBytes, nanoClock.getAsLong());
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
                WriteOp op = new WriteOp(key, digest.get(), imageId, lengthBytes, retained);
                switch (dispatcher.submitWrite(op)) {
                    case QUEUED, QUEUED_DISPLACING_OLDEST -> { }
                    case CLOSED -> op.drop(IoOp.DropReason.CLOSED);
                }
            }
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
            } finally {
                queueLock.unlock();
            }
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
