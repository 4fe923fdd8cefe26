package io.orbitkv.core.storage.publish;

import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.orbitkv.core.cost.CostObserver;
import io.orbitkv.core.cost.ResourceId;
import io.orbitkv.core.namespace.NamespaceTable;
import io.orbitkv.core.storage.dram.AcquireResult;
import io.orbitkv.core.storage.dram.CommitResult;
import io.orbitkv.core.storage.dram.DramTier;
import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.core.storage.dram.PageKey;
import io.orbitkv.core.storage.dram.Reservation;
import io.orbitkv.core.storage.dram.ReserveResult;
import io.orbitkv.core.storage.ssd.SsdStore;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;

import java.lang.foreign.MemorySegment;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;

/**
 * The publish pipeline: seals produced blocks into DRAM, then decides separately whether and
 * when each DRAM-resident block is written to SSD.
 *
 * <p>Owns the {@link PublishQueues} (the bounded seal, hand-over and write-through queues and the
 * {@link WriteBudget}, behind one lock), the bounded reuse-aware hit table ({@link ReuseHits}),
 * the set of keys with an SSD write pending, and each admitted {@link SsdWrite} until it
 * finishes. Borrows the {@link DramTier}, the {@link SsdStore} and the {@link SsdIoDispatcher}
 * from their owner (the {@code TieredStore}).
 *
 * <p>Flow: {@link #publish} queues a weak {@link PageSource} (full queue: {@link PublishResult.Busy},
 * counted). {@link #sealQueued} (the owner's sealing thread) takes each block in order, opens
 * its source (gone: dropped, counted), reserves a DRAM slot, copies, and commits through
 * {@link #commitAndAdmit}, as the engine channel's zero-copy commits do: a sealed block enters
 * DRAM first and counts as sealed, with its bytes under {@code tier=dram}, whichever path wrote
 * it. SSD admission then runs by policy: {@code write-through} leases the image at once and
 * queues it in the bounded write-through queue ({@code writeLaneOps} images), from which
 * {@link #admitWriteThrough} admits it as soon as the write lane, the queued-bytes bound and the
 * rate allow (the sealer stops sealing while that queue is full, so the seal queue and then
 * {@code publish} push back); {@code on-evict} when DRAM evicts the image ({@link #onEvicted} hands
 * over a lease taken before the slot was freed, and {@link #admitEvicted} admits it);
 * {@code reuse-aware:N} on the N-th DRAM hit after the commit ({@link #onDramHit}). Admission then
 * asks the budget (over rate or queue bytes: skipped, counted, the block stays in DRAM) and queues
 * a write on the dispatcher's write lane. A queued write holds only key + image id (or the
 * eviction lease); at its turn it leases exactly that image, quietly, and writes from the DRAM
 * slot with no copy; if the image is gone the write is dropped (counted).
 *
 * <p>Tenant SSD caps: a write is admitted only within its tenant's {@code ssdBytes}
 * ({@link TenantSsdLedger}, charged from the key's entry in the pending-write set until it leaves
 * it); over the cap it is skipped as {@code tenant_quota}. Size: over 500 lines because the three
 * admission policies share one pending-write set and one budget; each policy's steps are short.
 *
 * <p>Thread model: {@code publish}, {@code onCommitted} and {@code onDramHit} from any thread;
 * {@code sealQueued} and {@code admitEvicted} from one sealing thread at a time; {@code onEvicted}
 * on DRAM's evicting thread under that key's index lock, so it only queues (bounded). The queues'
 * lock is held only inside {@link PublishQueues}, never while calling another component.
 *
 * <p>Invariants: the queues' bounds ({@link PublishQueues}); every queued block is sealed or
 * dropped exactly once, and its source closed exactly once; every admitted write returns its bytes to the budget exactly once and
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
    private static final AtomicLong INCARNATIONS = new AtomicLong();

    private final DramTier dram;
    private final SsdStore ssd;
    private final SsdIoDispatcher dispatcher;
    private final PublishConfig config;
    private final NamespaceTable namespaces;
    private final PublishMetrics metrics;
    private final DramCopyObservations copies;
    private final PublishQueues queues;
    /** The {@code reuse-aware:N} hit counts; empty under the other policies. */
    private final Optional<ReuseHits> reuseHits;
    /** Images (namespace id, key) admitted for SSD and not yet written, so each is written once. */
    private final Set<PageKey> pendingWrites = ConcurrentHashMap.newKeySet();
    /**
     * Keys a HINT DROP named while their SSD write was pending, with the namespaces that dropped
     * them: the write's extent is deleted again when it lands, if its namespace is among them. An
     * entry lives until its key's write finishes, so there are at most as many as pending writes.
     */
    private final ConcurrentHashMap<StateKey, Set<NamespaceDigest>> droppedWhilePending = new ConcurrentHashMap<>();
    private final AtomicBoolean closeCalled = new AtomicBoolean();
    /** The tenants' SSD caps: a pending write is charged from {@code pendingWrites.add} to {@link #unpend}. */
    private final TenantSsdLedger tenantSsd;
    private final MeterRegistry registry;

    /** @param nanoClock the budget's clock ({@code System::nanoTime} in production; tests drive it) */
    public PublishPipeline(DramTier dram, SsdStore ssd, SsdIoDispatcher dispatcher, PublishConfig config,
                           NamespaceTable namespaces, MeterRegistry registry, LongSupplier nanoClock) {
        this(dram, ssd, dispatcher, config, namespaces, registry, nanoClock, CostObserver.disabled());
    }

    /** As above, reporting each sealing copy to {@code observer} as a DRAM copy. */
    public PublishPipeline(DramTier dram, SsdStore ssd, SsdIoDispatcher dispatcher, PublishConfig config,
                           NamespaceTable namespaces, MeterRegistry registry, LongSupplier nanoClock,
                           CostObserver observer) {
        this(dram, ssd, dispatcher, config, namespaces, registry, nanoClock, observer,
                new TenantSsdLedger(dram.tenants()));
    }

    /**
     * As above, admitting SSD writes within the SSD caps of {@code tenantSsd} (whose owner attaches it
     * to the SSD index's changes, {@code ResidencyStream#attach(ResidencyStream.SsdChange)}, before
     * the store recovers).
     */
    public PublishPipeline(DramTier dram, SsdStore ssd, SsdIoDispatcher dispatcher, PublishConfig config,
                           NamespaceTable namespaces, MeterRegistry registry, LongSupplier nanoClock,
                           CostObserver observer, TenantSsdLedger tenantSsd) {
        this.tenantSsd = Objects.requireNonNull(tenantSsd, "tenantSsd");
        this.registry = Objects.requireNonNull(registry, "registry");
        this.copies = new DramCopyObservations(observer,
                new ResourceId("dram:" + dram.config().arenaName(), INCARNATIONS.incrementAndGet()));
        this.dram = Objects.requireNonNull(dram, "dram");
        this.ssd = Objects.requireNonNull(ssd, "ssd");
        this.dispatcher = Objects.requireNonNull(dispatcher, "dispatcher");
        this.config = Objects.requireNonNull(config, "config");
        this.namespaces = Objects.requireNonNull(namespaces, "namespaces");
        this.queues = new PublishQueues(config, Objects.requireNonNull(nanoClock, "nanoClock"));
        this.reuseHits = config.policy() instanceof SsdAdmissionPolicy.ReuseAware(int threshold)
                ? Optional.of(new ReuseHits(config.hitTableEntries(), threshold)) : Optional.empty();
        this.metrics = new PublishMetrics(registry, Tags.of("arena", dram.config().arenaName()));
        metrics.queueGauges(queues);
        tenantSsd.registerMeters(registry, Tags.of("arena", dram.config().arenaName()));
    }

    /** Queues {@code source} to be sealed as {@code key}'s image. Never blocks. */
    public PublishResult publish(StateKey key, int namespaceId, PageSource source) {
        Objects.requireNonNull(key, "key");
        Objects.requireNonNull(source, "source");
        int length = source.lengthBytes();
        if (length <= 0) throw new IllegalArgumentException("lengthBytes must be positive: " + length);
        PublishResult result = queues.offerSeal(new PublishQueues.SealRequest(key, namespaceId, source,
                copies.enabled() ? System.nanoTime() : 0));
        if (result instanceof PublishResult.Busy) metrics.sealBusy.increment();
        return result;
    }

    /**
     * Seals up to {@code maxBlocks} queued blocks in order; returns how many were taken. Under
     * {@code write-through} it stops early while the write-through queue is full: the block would
     * have no SSD write room, so it waits in the seal queue (and a full seal queue refuses publishes).
     */
    public int sealQueued(int maxBlocks) {
        int taken = 0;
        while (taken < maxBlocks) {
            admitWriteThrough();
            Optional<PublishQueues.SealRequest> next = queues.pollSeal();
            if (next.isEmpty()) return taken;
            taken++;
            seal(next.get());
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
            switch (queues.nextEvicted()) {
                case PublishQueues.EvictedTurn.Wait() -> {
                    return admitted;
                }
                case PublishQueues.EvictedTurn.TooLarge(PublishQueues.Evicted e) ->
                        skip(PublishMetrics.Skip.QUEUE_FULL, Optional.of(e.retained()));
                case PublishQueues.EvictedTurn.Admitted(PublishQueues.Evicted e) -> {
                    admitTaken(e.retained(), e.namespaceId());
                    admitted++;
                }
            }
        }
    }

    /**
     * SSD admission of a handed-over image whose lane slot and budget bytes are already taken
     * ({@link PublishQueues#nextEvicted}): written unless its namespace is gone or the SSD holds it
     * (then both return at once, counted as the skip). An SSD copy in the ring's oldest
     * {@code ssdRefreshFraction} is written again instead of skipped (the new generation replaces
     * it in the index), so a page read back and used again is not overwritten by the ring while it
     * is still in use.
     */
    private void admitTaken(Lease lease, int namespaceId) {
        StateKey key = lease.key();
        PageKey page = new PageKey(namespaceId, key);
        Optional<NamespaceDigest> digest = namespaces.digest(namespaceId);
        boolean stored = digest.isPresent() && ssd.contains(key, digest.get());
        boolean refresh = stored && config.ssdRefreshFraction() > 0
                && ssd.isAgeing(key, digest.get(), config.ssdRefreshFraction());
        PublishMetrics.Skip skip = digest.isEmpty() ? PublishMetrics.Skip.UNKNOWN_NAMESPACE
                : (stored && !refresh) || !pendingWrites.add(page) ? PublishMetrics.Skip.ALREADY_STORED : null;
        if (skip == null && !tenantSsd.admit(key, dram.tenantOf(lease), lease.lengthBytes())) {
            pendingWrites.remove(page);
            skip = PublishMetrics.Skip.TENANT_QUOTA;
        }
        if (skip != null) {
            queues.onWriteFinished(lease.lengthBytes());
            skip(skip, Optional.of(lease));
            return;
        }
        metrics.admitted.increment();
        if (refresh) metrics.refreshed.increment();
        submit(page, digest.get(), lease.imageId(), lease.lengthBytes(), Optional.of(lease));
    }

    /**
     * Waits up to {@code timeoutNanos} for a block to seal or an evicted image to admit; true
     * when there is work. For the sealing thread.
     */
    public boolean awaitWork(long timeoutNanos) throws InterruptedException {
        return queues.awaitWork(timeoutNanos);
    }

    /**
     * Admits queued write-through blocks, oldest first, while the write lane has room
     * ({@code writeLaneOps} admitted writes), the queued-bytes bound and the rate allow (the rate
     * is ignored while {@link #close} drains); returns how many. Any thread; never blocks.
     */
    public int admitWriteThrough() {
        int admitted = 0;
        for (;;) {
            switch (queues.nextWriteThrough()) {
                case PublishQueues.WriteThroughTurn.Wait() -> {
                    return admitted;
                }
                case PublishQueues.WriteThroughTurn.TooLarge(PublishQueues.WriteThroughEntry entry) -> {
                    unpend(pageOf(entry.lease())); // never fits the queued-bytes bound: not waited for
                    skip(PublishMetrics.Skip.QUEUE_FULL, Optional.of(entry.lease()));
                }
                case PublishQueues.WriteThroughTurn.Admitted(PublishQueues.WriteThroughEntry entry) -> {
                    Lease lease = entry.lease();
                    metrics.admitted.increment();
                    submit(pageOf(lease), entry.digest(), lease.imageId(), lease.lengthBytes(), Optional.of(lease));
                    admitted++;
                }
            }
        }
    }

    /** Sealed blocks waiting (leased) for SSD write room under write-through. */
    public int writeThroughQueueDepth() {
        return queues.writeThroughQueueDepth();
    }

    /**
     * {@code key}'s image {@code imageId} (of {@code namespaceId}, {@code lengthBytes}) was just
     * committed to DRAM, by sealing or by a zero-copy publisher: run SSD admission per policy.
     */
    public void onCommitted(StateKey key, int namespaceId, long imageId, int lengthBytes) {
        switch (config.policy()) {
            case SsdAdmissionPolicy.WriteThrough() -> enqueueWriteThrough(key, namespaceId, imageId);
            case SsdAdmissionPolicy.OnEvict() -> { }
            case SsdAdmissionPolicy.ReuseAware(int ignored) -> reuseHits.orElseThrow()
                    .committed(new PageKey(namespaceId, key), new ReuseHits.Candidate(namespaceId, imageId, lengthBytes));
        }
    }

    /** A reader leased {@code lease} from DRAM: counts a hit for {@code reuse-aware:N}. */
    public void onDramHit(Lease lease) {
        reuseHits.flatMap(hits -> hits.onHit(lease)).ifPresent(c ->
                admit(lease.key(), c.namespaceId(), c.imageId(), c.lengthBytes()));
    }

    /**
     * DRAM's {@link io.orbitkv.core.storage.dram.EvictionListener}. Under {@code on-evict} the
     * retained image is queued for {@link #admitEvicted} (the evicting thread holds an index lock,
     * so nothing else happens here) and its lease travels with the write; it waits there for lane
     * room and write budget, and only a hand-over queue at {@code writeQueueBytes} drops it,
     * counted as {@code lane_full}. Under the other
     * policies the lease is released at once.
     */
    public void onEvicted(Lease retained, int namespaceId) {
        switch (config.policy()) {
            case SsdAdmissionPolicy.OnEvict() -> {
                if (!queues.offerEvicted(new PublishQueues.Evicted(retained, namespaceId))) {
                    metrics.writeDropped(PublishMetrics.WriteDrop.LANE_FULL);
                    retained.release();
                }
            }
            case SsdAdmissionPolicy.WriteThrough() -> retained.release();
            case SsdAdmissionPolicy.ReuseAware(int ignored) -> {
                reuseHits.orElseThrow().evicted(pageOf(retained));
                retained.release();
            }
        }
    }

    public long sealQueueBytes() {
        return queues.sealQueueBytes();
    }

    public int sealQueueDepth() {
        return queues.sealQueueDepth();
    }

    /** Bytes admitted for SSD and not yet written or dropped. */
    public long writeQueuedBytes() {
        return queues.writeQueuedBytes();
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
        if (!closeCalled.compareAndSet(false, true)) return;
        drainWriteThrough(config.drainTimeoutNanos());
        PublishQueues.Closed taken = queues.close();
        for (PublishQueues.SealRequest r : taken.sealRequests()) {
            r.source().close();
            metrics.sealDropped(PublishMetrics.SealDrop.CLOSED);
        }
        for (PublishQueues.Evicted e : taken.evicted()) {
            e.retained().release();
            metrics.writeDropped(PublishMetrics.WriteDrop.CLOSED);
        }
        metrics.close();
        tenantSsd.removeMeters(registry);
    }

    private void drainWriteThrough(long timeoutNanos) {
        queues.startDraining();
        long deadline = System.nanoTime() + timeoutNanos;
        do {
            admitWriteThrough();
        } while (queues.awaitWriteRoom(deadline));
        for (PublishQueues.WriteThroughEntry e : queues.closeWriteThrough()) {
            unpend(pageOf(e.lease()));
            e.lease().release();
            metrics.writeDropped(PublishMetrics.WriteDrop.CLOSED);
        }
    }

    // ---- sealing ---------------------------------------------------------------------------

    private void seal(PublishQueues.SealRequest request) {
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
                    if (commitAndAdmit(reservation) instanceof CommitResult.NotOpen) {
                        throw new IllegalStateException("the pipeline's own reservation was closed: " + reservation);
                    }
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
        if (ssd.contains(key, digest.get()) || pendingWrites.contains(new PageKey(namespaceId, key))) {
            skip(PublishMetrics.Skip.ALREADY_STORED, Optional.empty());
            return;
        }
        if (!(dram.acquireImage(key, namespaceId, imageId) instanceof Lease lease)) {
            // Evicted between its commit and this call: nothing is left to write.
            metrics.writeDropped(PublishMetrics.WriteDrop.SOURCE_GONE);
            return;
        }
        enqueueWriteThrough(lease);
    }

    /** As above with the image's lease already taken; the lease goes with the write, or back. */
    private void enqueueWriteThrough(Lease lease) {
        StateKey key = lease.key();
        PageKey page = pageOf(lease);
        Optional<NamespaceDigest> digest = namespaces.digest(lease.namespaceId());
        if (digest.isEmpty()) {
            skip(PublishMetrics.Skip.UNKNOWN_NAMESPACE, Optional.of(lease));
            return;
        }
        if (ssd.contains(key, digest.get()) || !pendingWrites.add(page)) {
            skip(PublishMetrics.Skip.ALREADY_STORED, Optional.of(lease));
            return;
        }
        if (!tenantSsd.admit(key, dram.tenantOf(lease), lease.lengthBytes())) {
            pendingWrites.remove(page);
            skip(PublishMetrics.Skip.TENANT_QUOTA, Optional.of(lease));
            return;
        }
        switch (queues.offerWriteThrough(new PublishQueues.WriteThroughEntry(lease, digest.get()))) {
            case QUEUED -> admitWriteThrough();
            case FULL -> {
                unpend(page);
                lease.release();
                metrics.skipped(PublishMetrics.Skip.QUEUE_FULL);
            }
            case CLOSED -> {
                unpend(page);
                lease.release();
                metrics.writeDropped(PublishMetrics.WriteDrop.CLOSED);
            }
        }
    }

    /** SSD admission of a {@code reuse-aware:N} candidate: asks the budget, skips (counted) when it says no. */
    private void admit(StateKey key, int namespaceId, long imageId, int lengthBytes) {
        Optional<NamespaceDigest> digest = namespaces.digest(namespaceId);
        if (digest.isEmpty()) {
            metrics.skipped(PublishMetrics.Skip.UNKNOWN_NAMESPACE);
            return;
        }
        PageKey page = new PageKey(namespaceId, key);
        if (ssd.contains(key, digest.get()) || !pendingWrites.add(page)) {
            metrics.skipped(PublishMetrics.Skip.ALREADY_STORED);
            return;
        }
        if (!tenantSsd.admit(key, dram.tenantOf(key, namespaceId, imageId), lengthBytes)) {
            pendingWrites.remove(page);
            metrics.skipped(PublishMetrics.Skip.TENANT_QUOTA);
            return;
        }
        switch (queues.tryAdmit(lengthBytes)) {
            case OVER_RATE -> {
                unpend(page);
                metrics.skipped(PublishMetrics.Skip.OVER_RATE);
            }
            case QUEUE_FULL -> {
                unpend(page);
                metrics.skipped(PublishMetrics.Skip.QUEUE_FULL);
            }
            case ADMITTED -> {
                metrics.admitted.increment();
                submit(page, digest.get(), imageId, lengthBytes, Optional.empty());
            }
        }
    }

    private void submit(PageKey page, NamespaceDigest digest, long imageId, int lengthBytes, Optional<Lease> retained) {
        SsdWrite op = new SsdWrite(page, digest, imageId, lengthBytes, retained, dram, ssd, metrics, this::onWriteFinished);
        switch (dispatcher.submitWrite(op)) {
            case QUEUED, QUEUED_DISPLACING_OLDEST -> { }
            case CLOSED -> op.drop(IoOp.DropReason.CLOSED);
        }
    }

    /**
     * A HINT DROP of {@code key} in namespace {@code namespaceId} ({@code namespace}): a write of
     * that page still pending (queued or in flight) would index it on SSD after the drop, so its
     * extent is deleted when it lands. Nothing when no write of the page is pending.
     */
    public void dropped(StateKey key, int namespaceId, NamespaceDigest namespace) {
        PageKey page = new PageKey(namespaceId, key);
        if (!pendingWrites.contains(page)) return;
        droppedWhilePending.computeIfAbsent(key, k -> ConcurrentHashMap.newKeySet()).add(namespace);
        // The write may have finished between the check and the mark: then no finish will see it.
        if (!pendingWrites.contains(page)) deleteIfDropped(key, namespace);
    }

    private void deleteIfDropped(StateKey key, NamespaceDigest written) {
        Set<NamespaceDigest> droppers = droppedWhilePending.remove(key);
        if (droppers != null && droppers.contains(written)) ssd.delete(key, written);
    }

    /** An admitted write finished (any outcome, exactly once): its key, bytes and lane slot return. */
    private void onWriteFinished(SsdWrite write) {
        unpend(write.page());
        deleteIfDropped(write.page().key(), write.namespace());
        queues.onWriteFinished(write.lengthBytes());
        // The lane has room again: the next write-through block need not wait for the sealer.
        if (config.policy() instanceof SsdAdmissionPolicy.WriteThrough) admitWriteThrough();
    }

    private static PageKey pageOf(Lease lease) {
        return new PageKey(lease.namespaceId(), lease.key());
    }

    /**
     * The page's pending write is over (queued no more, finished or dropped): its tenant charge
     * ends first. The tenant ledger's pending charges are by key (a key pending in two namespaces
     * at once, only possible with a forged STATE_KEY, shares one charge).
     */
    private void unpend(PageKey page) {
        tenantSsd.finished(page.key());
        pendingWrites.remove(page);
    }

    private void skip(PublishMetrics.Skip reason, Optional<Lease> retained) {
        metrics.skipped(reason);
        retained.ifPresent(Lease::release);
    }
}
