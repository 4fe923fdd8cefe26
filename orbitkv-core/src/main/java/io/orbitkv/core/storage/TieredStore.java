package io.orbitkv.core.storage;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.orbitkv.core.cost.CostObserver;
import io.orbitkv.core.namespace.NamespaceTable;
import io.orbitkv.core.storage.dram.AcquireResult;
import io.orbitkv.core.storage.dram.CommitResult;
import io.orbitkv.core.storage.dram.DramTier;
import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.core.storage.dram.Reservation;
import io.orbitkv.core.storage.dram.ReserveResult;
import io.orbitkv.core.storage.publish.IoOp;
import io.orbitkv.core.storage.publish.PageSource;
import io.orbitkv.core.storage.publish.PublishPipeline;
import io.orbitkv.core.storage.publish.PublishResult;
import io.orbitkv.core.storage.publish.SsdIoDispatcher;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.core.storage.residency.RetentionLedger;
import io.orbitkv.core.storage.ssd.ExtentDevice;
import io.orbitkv.core.storage.ssd.Pin;
import io.orbitkv.core.storage.ssd.PinResult;
import io.orbitkv.core.storage.ssd.ReadResult;
import io.orbitkv.core.storage.ssd.RecoveryReport;
import io.orbitkv.core.storage.ssd.SsdStore;
import io.orbitkv.state.StateKey;

import java.io.IOException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.OptionalInt;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.LongSupplier;

/**
 * The Manager's local storage as one thing: the {@link DramTier}, the {@link SsdStore}, the
 * {@link PublishPipeline} and the {@link SsdIoDispatcher} in front of the store, wired to one
 * {@link ResidencyStream}. This is what the query layer calls: {@link #lookup} (where are the
 * bytes now), {@link #stage} (bring them into DRAM and lease them), {@link #publish} and the
 * zero-copy {@link #reserve}/{@link #commit} (add a block).
 *
 * <p>Owns all four components, the sealing thread and the bounded table of in-flight stagings
 * (key → the one backing SSD read that every concurrent staging of that key shares).
 *
 * <p>Thread model: all public methods are thread-safe and never block on I/O; staging completes
 * its future on an SSD worker thread (or at once for a DRAM hit or a refusal). The sealing
 * thread (a platform thread, {@code orbitkv-sealer-<arena>}) runs {@link PublishPipeline#sealQueued}
 * and {@link PublishPipeline#admitEvicted}.
 * {@link #close()} stops intake and the sealer, drops blocks not yet sealed (counted), admits the
 * sealed write-through blocks still waiting, lets queued and in-flight SSD work finish (each step
 * bounded by the publish {@code drainTimeoutNanos}), then closes the store and the DRAM tier.
 *
 * <p>Invariants: at most {@code maxInflightStages} keys are being staged and each has exactly
 * one backing read; a staging of a new key beyond that waits, first come first served, in the
 * bounded staging queue ({@code maxQueuedStages} keys) and starts when a staging finishes, so a
 * page on SSD is refused (Busy) only past both bounds; a staging's SSD pin is released and its DRAM reservation committed or
 * aborted exactly once, whatever the read returned; only a {@link ReadResult.Served} read is
 * committed, so a corrupt extent is never served; every caller of a successful staging gets its
 * own lease.
 *
 * <p>Design note: staging reads with {@code O_DIRECT} straight into the reserved DRAM slot (slots
 * are 4 KiB aligned and padded to 4 KiB, {@link Reservation#blockSegment()}), so a 2 MiB restore
 * costs one device transfer and no CPU copy (a bounce copy costs ~0.2 ms per 2 MiB at 10 GB/s).
 * Sharing one read per key matters because a popular prefix's blocks are requested by several
 * sessions at once right after an eviction; without the table each would reserve its own slot
 * and read the same bytes again, and only one commit would win. The staging queue exists because
 * the table alone answered Busy as soon as 16 queries with 64 stagings each (1,024 keys) met a
 * 256-key table, although every bound the operator configured per query held: 5 % of pages that
 * were on SSD became final misses. Waiting costs a queued key one table turn (one SSD read, 0.1-1
 * ms); refusing costs it a recomputation.
 */
public final class TieredStore implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(TieredStore.class.getName());
    private static final long SEAL_POLL_NANOS = TimeUnit.MILLISECONDS.toNanos(100);
    private static final int SEAL_BATCH_BLOCKS = 64;

    /** Counted staging outcomes ({@code orbitkv.tiered.stage}, tag {@code result}). */
    private enum StageCount { DRAM_HIT, SSD_READ, SHARED_READ, MISS, BUSY }

    /** A staging of a new key waiting for a table entry; {@code caller} completes like a direct staging's. */
    private record Waiting(StateKey key, CompletableFuture<StageResult> caller) {}

    /** A staging whose DRAM reservation met the reserved-bytes budget; it keeps its table entry and retries. */
    private record Parked(StateKey key, Inflight inflight) {}

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

        CompletableFuture<StageResult> forCaller(java.util.function.Function<StageResult, StageResult> ownLease) {
            return outcome.thenApply(ownLease).thenCombine(settled, (mine, ignored) -> mine);
        }
    }

    private final TieredStoreConfig config;
    private final NamespaceTable namespaces;
    private final ResidencyStream residency;
    private final DramTier dram;
    private final SsdStore ssd;
    private final RecoveryReport recovery;
    private final SsdIoDispatcher dispatcher;
    private final PublishPipeline pipeline;
    private final ConcurrentHashMap<StateKey, Inflight> stagings = new ConcurrentHashMap<>();
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
    private final Counter stagesQueued;
    private final Counter stagesParked;
    private final Thread sealer;
    private final AtomicBoolean closed = new AtomicBoolean();
    private final MeterRegistry registry;
    private final List<Meter> meters = new ArrayList<>();
    private final Map<StageCount, Counter> stageCounts = new EnumMap<>(StageCount.class);
    private final CostObserver costObserver;

    private TieredStore(TieredStoreConfig config, NamespaceTable namespaces, ResidencyStream residency, DramTier dram,
                        SsdStore ssd, RecoveryReport recovery, MeterRegistry registry, LongSupplier nanoClock,
                        CostObserver observer) {
        this.config = config;
        this.namespaces = namespaces;
        this.residency = residency;
        this.dram = dram;
        this.ssd = ssd;
        this.recovery = recovery;
        this.registry = registry;
        this.costObserver = observer;
        String storeName = config.ssd().directory().toString();
        this.dispatcher = new SsdIoDispatcher(config.ssd().ioThreads(), config.publish().readLaneOps(),
                config.publish().writeLaneOps(), config.publish().maxReadsWhileWriteWaits(), registry, storeName);
        this.pipeline = new PublishPipeline(dram, ssd, dispatcher, config.publish(), namespaces, registry, nanoClock,
                observer);
        dram.setEvictionListener(pipeline::onEvicted);
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
        meters.add(Gauge.builder("orbitkv.tiered.stage.queue.depth", this, TieredStore::queuedStagings).tags(tags)
                .description("stagings waiting for an in-flight table entry").register(registry));
        stagesQueued = Counter.builder("orbitkv.tiered.stage.queued").tags(tags)
                .description("stagings that waited for an in-flight table entry").register(registry);
        meters.add(stagesQueued);
        stagesParked = Counter.builder("orbitkv.tiered.stage.parked").tags(tags)
                .description("stagings that waited for DRAM reserved bytes held by other stagings").register(registry);
        meters.add(stagesParked);
        this.sealer = Thread.ofPlatform().name("orbitkv-sealer-" + config.dram().arenaName()).daemon()
                .unstarted(this::sealLoop);
    }

    /** The cost observer this store's owners report to (the disabled one unless observations are on). */
    public CostObserver costObserver() {
        return costObserver;
    }

    /**
     * Opens both tiers on one new residency stream, recovers the SSD store, and starts the
     * sealing thread. {@code namespaces} maps the ids DRAM uses to the digests SSD records.
     */
    public static TieredStore open(TieredStoreConfig config, NamespaceTable namespaces, MeterRegistry registry)
            throws IOException {
        return open(config, namespaces, registry, CostObserver.disabled());
    }

    /**
     * As {@link #open(TieredStoreConfig, NamespaceTable, MeterRegistry)}, reporting the SSD
     * reads (either route; staging included) and the sealing DRAM copies to {@code observer}.
     */
    public static TieredStore open(TieredStoreConfig config, NamespaceTable namespaces, MeterRegistry registry,
                                   CostObserver observer) throws IOException {
        return open(config, namespaces, registry, System::nanoTime, observer);
    }

    /** As {@link #open(TieredStoreConfig, NamespaceTable, MeterRegistry)}, with the write budget's clock. */
    static TieredStore open(TieredStoreConfig config, NamespaceTable namespaces, MeterRegistry registry,
                            LongSupplier nanoClock) throws IOException {
        return open(config, namespaces, registry, nanoClock, CostObserver.disabled());
    }

    private static TieredStore open(TieredStoreConfig config, NamespaceTable namespaces, MeterRegistry registry,
                                    LongSupplier nanoClock, CostObserver observer) throws IOException {
        return open(config, namespaces, registry, nanoClock, observer, ExtentDevice.NONE);
    }

    /**
     * As {@link #open(TieredStoreConfig, NamespaceTable, MeterRegistry, CostObserver)} with the SSD
     * store's extent I/O decorated by {@code device} (the reliability campaign's fault injection).
     */
    public static TieredStore open(TieredStoreConfig config, NamespaceTable namespaces, MeterRegistry registry,
                                   CostObserver observer, ExtentDevice.Wrapper device) throws IOException {
        return open(config, namespaces, registry, System::nanoTime, observer, device);
    }

    private static TieredStore open(TieredStoreConfig config, NamespaceTable namespaces, MeterRegistry registry,
                                    LongSupplier nanoClock, CostObserver observer, ExtentDevice.Wrapper device)
            throws IOException {
        Objects.requireNonNull(observer, "observer");
        Objects.requireNonNull(namespaces, "namespaces");
        ResidencyStream residency = new ResidencyStream(config.residencyEvents());
        // attached before recovery, so the recovered extents are counted as retained
        residency.attach(new RetentionLedger(namespaces, registry));
        DramTier dram = DramTier.open(config.dram(), residency, registry);
        SsdStore ssd = null;
        try {
            ssd = SsdStore.openDecorated(config.ssd(), residency, registry, observer, device);
            RecoveryReport recovery = ssd.recover();
            TieredStore store = new TieredStore(config, namespaces, residency, dram, ssd, recovery, registry,
                    nanoClock, observer);
            store.sealer.start();
            return store;
        } catch (IOException | RuntimeException e) {
            if (ssd != null) ssd.close();
            dram.close();
            throw e;
        }
    }

    /** Where {@code key}'s bytes are now: a DRAM lease (counts as a hit), an SSD pin, or a miss. */
    public LookupResult lookup(StateKey key) {
        Objects.requireNonNull(key, "key");
        requireOpen();
        if (dram.acquire(key) instanceof Lease lease) {
            pipeline.onDramHit(lease);
            return new LookupResult.InDram(lease);
        }
        return switch (ssd.pin(key)) {
            case Pin pin -> new LookupResult.OnSsd(pin);
            case PinResult.Miss miss -> new LookupResult.Miss(miss.key());
        };
    }

    /**
     * The DRAM part of {@link #lookup} for a run of consecutive keys ({@link DramTier#acquireRun}:
     * one slot-table lock trip per run of pages, not per page): leases {@code keyOf.key(i)} for
     * {@code i} from {@code from} while its image is resident in {@code namespaceId}, storing keys
     * and leases at index {@code i}, and returns the first index it did not lease ({@code to} when
     * all were). The key at that index is stored but not looked up: the caller calls
     * {@link #lookup} for it (an SSD pin, another namespace's image, or a miss).
     */
    public int leaseRun(DramTier.RunKeys keyOf, int from, int to, int namespaceId, StateKey[] keys, Lease[] leases) {
        requireOpen();
        int end = dram.acquireRun(keyOf, from, to, namespaceId, keys, leases);
        for (int i = from; i < end; i++) pipeline.onDramHit(leases[i]);
        return end;
    }

    /**
     * A DRAM lease on {@code key}'s image, reading it from SSD into a fresh DRAM slot if needed.
     * Concurrent stagings of one key share one backing read; each caller gets its own lease.
     * With {@code maxInflightStages} keys in flight a new key waits in the staging queue; only a
     * full queue ({@code maxQueuedStages}) answers {@link StageResult.BusyReason#INFLIGHT_TABLE_FULL}.
     */
    public CompletableFuture<StageResult> stage(StateKey key) {
        Objects.requireNonNull(key, "key");
        if (closed.get()) return CompletableFuture.completedFuture(new StageResult.Miss(key, StageResult.MissReason.CLOSED));
        if (dram.acquire(key) instanceof Lease lease) {
            pipeline.onDramHit(lease);
            return completed(new StageResult.Staged(lease, StageResult.Source.DRAM_HIT));
        }
        Inflight existing = stagings.get(key);
        if (existing != null) return existing.forCaller(r -> leaseFor(key, r, StageResult.Source.SHARED_READ));
        Waiting queued;
        stageLock.lock();
        try {
            if (waiting.isEmpty() && stagePermits < config.maxInflightStages()) {
                stagePermits++;
                queued = null;
            } else if (waiting.size() < config.maxQueuedStages() && !closed.get()) {
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
    public int queuedStagings() {
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
    private CompletableFuture<StageResult> stageHoldingPermit(StateKey key) {
        if (dram.acquire(key) instanceof Lease lease) {
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
    private boolean park(StateKey key, Inflight inflight) {
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
                if (closed.get()) finish(retry.key(), retry.inflight(), new StageResult.Miss(retry.key(), StageResult.MissReason.CLOSED));
                else startStaging(retry.key(), retry.inflight());
            }
            for (;;) {
                Waiting next;
                boolean refuse;
                stageLock.lock();
                try {
                    if (waiting.isEmpty() || stagePermits >= config.maxInflightStages()) break;
                    next = waiting.pollFirst();
                    refuse = closed.get();
                    if (!refuse) stagePermits++;
                } finally {
                    stageLock.unlock();
                }
                if (refuse) {
                    next.caller().complete(new StageResult.Miss(next.key(), StageResult.MissReason.CLOSED));
                    continue;
                }
                Waiting started = next;
                stageHoldingPermit(started.key()).whenComplete((result, failure) -> started.caller().complete(
                        failure == null ? result : new StageResult.Miss(started.key(), StageResult.MissReason.IO_ERROR)));
            }
        } while (drainPasses.decrementAndGet() != 0);
    }

    /** Queues a block to be sealed into DRAM (then admitted to SSD by policy). Never blocks. */
    public PublishResult publish(StateKey key, int namespaceId, PageSource source) {
        requireOpen();
        return pipeline.publish(key, namespaceId, source);
    }

    /** Zero-copy publish, step 1: a DRAM slot the engine writes into (see {@link DramTier#reserve}). */
    public ReserveResult reserve(StateKey key, int namespaceId, int lengthBytes) {
        requireOpen();
        return dram.reserve(key, namespaceId, lengthBytes);
    }

    /** Zero-copy publish, step 2: commits the reservation; a new image then goes through SSD admission. */
    public CommitResult commit(Reservation reservation) {
        requireOpen();
        return pipeline.commitAndAdmit(reservation);
    }

    /** Keys resident on {@code medium} now, a weakly consistent copy (catalog resynchronisation). */
    public List<StateKey> residentKeys(ResidencyEvent.Medium medium) {
        return switch (medium) {
            case DRAM -> dram.residentKeys();
            case SSD -> ssd.residentKeys();
        };
    }

    /** The stream both tiers append to. */
    public RetentionLedger retention() {
        return residency.retention();
    }

    public ResidencyStream residency() {
        return residency;
    }

    /** What the SSD store kept and dropped when it opened. */
    public RecoveryReport recovery() {
        return recovery;
    }

    public DramTier dram() {
        return dram;
    }

    public SsdStore ssd() {
        return ssd;
    }

    public PublishPipeline pipeline() {
        return pipeline;
    }

    public SsdIoDispatcher dispatcher() {
        return dispatcher;
    }

    /** Keys being staged now. */
    public int inflightStagings() {
        return stagings.size();
    }

    /**
     * Stops intake, stops the sealing thread (blocks not yet sealed are dropped, counted), admits
     * the sealed write-through blocks still waiting, drains the dispatcher (queued and in-flight SSD
     * work finishes, bounded), then closes SSD and DRAM. After a clean stop every block sealed under
     * {@code write-through} is on SSD unless a counted reason says otherwise.
     * Idempotent.
     */
    @Override
    public void close() {
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
        for (Waiting w : refused) w.caller().complete(new StageResult.Miss(w.key(), StageResult.MissReason.CLOSED));
        for (Parked p : unparked) finish(p.key(), p.inflight(), new StageResult.Miss(p.key(), StageResult.MissReason.CLOSED));
        try {
            // The sealer stops first, so no block it seals meets a closed pipeline; then the pipeline
            // admits its waiting write-through blocks, and the dispatcher drains every admitted write.
            sealer.interrupt();
            sealer.join(TimeUnit.NANOSECONDS.toMillis(config.publish().drainTimeoutNanos()));
            pipeline.close();
            if (!dispatcher.close(config.publish().drainTimeoutNanos())) {
                LOG.log(System.Logger.Level.WARNING, "tiered store closed before all SSD work drained");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            for (Meter m : meters) registry.remove(m);
            ssd.close();
            dram.close();
        }
    }

    // ---- staging ---------------------------------------------------------------------------

    private void startStaging(StateKey key, Inflight inflight) {
        if (!(ssd.pin(key) instanceof Pin pin)) {
            finish(key, inflight, new StageResult.Miss(key, StageResult.MissReason.NOT_FOUND));
            return;
        }
        OptionalInt namespaceId = namespaces.id(pin.namespace());
        if (namespaceId.isEmpty()) {
            ssd.unpin(pin);
            finish(key, inflight, new StageResult.Miss(key, StageResult.MissReason.UNKNOWN_NAMESPACE));
            return;
        }
        switch (dram.reserve(key, namespaceId.getAsInt(), pin.payloadBytes())) {
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
                ReadOp op = new ReadOp(key, inflight, pin, reservation);
                switch (dispatcher.submitRead(op)) {
                    case QUEUED -> { }
                    case LANE_FULL -> op.abandon(new StageResult.Busy(StageResult.BusyReason.READ_LANE_FULL));
                    case CLOSED -> op.abandon(new StageResult.Miss(key, StageResult.MissReason.CLOSED));
                }
            }
        }
    }

    /** The backing read of one staging; the dispatcher starts or drops it exactly once. */
    private final class ReadOp implements IoOp {
        private final StateKey key;
        private final Inflight inflight;
        private final Pin pin;
        private final Reservation reservation;

        ReadOp(StateKey key, Inflight inflight, Pin pin, Reservation reservation) {
            this.key = key;
            this.inflight = inflight;
            this.pin = pin;
            this.reservation = reservation;
        }

        @Override
        public CompletableFuture<?> start() {
            CompletableFuture<ReadResult> read;
            try {
                read = ssd.read(pin, reservation.blockSegment());
            } catch (RuntimeException e) {
                abandon(new StageResult.Miss(key, StageResult.MissReason.IO_ERROR));
                throw e;
            }
            return read.handle((result, failure) -> {
                ssd.unpin(pin);
                StageResult outcome = failure != null
                        ? aborted(new StageResult.Miss(key, StageResult.MissReason.IO_ERROR))
                        : onRead(result);
                finish(key, inflight, outcome);
                return outcome;
            });
        }

        @Override
        public void drop(DropReason reason) {
            abandon(switch (reason) {
                case CLOSED -> new StageResult.Miss(key, StageResult.MissReason.CLOSED);
                case LANE_FULL -> new StageResult.Busy(StageResult.BusyReason.READ_LANE_FULL);
            });
        }

        void abandon(StageResult outcome) {
            ssd.unpin(pin);
            finish(key, inflight, aborted(outcome));
        }

        private StageResult onRead(ReadResult result) {
            return switch (result) {
                case ReadResult.Served ignored -> switch (dram.commitAndAcquire(reservation)) {
                    case Lease lease -> new StageResult.Staged(lease,
                            lease.imageId() == reservation.imageId() ? StageResult.Source.SSD_READ
                                    : StageResult.Source.DRAM_HIT);
                    case AcquireResult.Miss ignored2 -> new StageResult.Miss(key, StageResult.MissReason.EVICTED);
                };
                case ReadResult.Corrupt ignored -> aborted(new StageResult.Miss(key, StageResult.MissReason.CORRUPT));
                case ReadResult.Busy ignored -> aborted(new StageResult.Busy(StageResult.BusyReason.SSD_QUEUE_FULL));
                case ReadResult.Released ignored -> aborted(new StageResult.Miss(key, StageResult.MissReason.IO_ERROR));
                case ReadResult.Failed ignored -> aborted(new StageResult.Miss(key, StageResult.MissReason.IO_ERROR));
            };
        }

        private StageResult aborted(StageResult outcome) {
            dram.abort(reservation);
            return outcome;
        }
    }

    private StageResult leaseImage(StateKey key, long imageId, StageResult.Source source) {
        return switch (dram.acquireImage(key, imageId)) {
            case Lease lease -> new StageResult.Staged(lease, source);
            case AcquireResult.Miss ignored -> new StageResult.Miss(key, StageResult.MissReason.EVICTED);
        };
    }

    /**
     * Publishes the backing read's outcome: leaves the table first (later stagings start afresh
     * or hit DRAM), completes the shared future (its dependents take their own leases while the
     * anchor lease is still held), then releases the anchor, and only then lets the callers'
     * futures complete ({@link Inflight#settled}).
     */
    private void finish(StateKey key, Inflight inflight, StageResult outcome) {
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
    private StageResult leaseFor(StateKey key, StageResult shared, StageResult.Source source) {
        StageResult mine = switch (shared) {
            case StageResult.Staged(Lease anchor, StageResult.Source anchorSource) -> {
                StageResult.Source own = anchorSource == StageResult.Source.DRAM_HIT ? anchorSource : source;
                if (dram.share(anchor) instanceof Lease lease) yield new StageResult.Staged(lease, own);
                // The anchor was already released (this caller joined just before it finished).
                yield dram.acquire(key) instanceof Lease lease
                        ? new StageResult.Staged(lease, StageResult.Source.DRAM_HIT)
                        : new StageResult.Miss(key, StageResult.MissReason.EVICTED);
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

    private void sealLoop() {
        while (!closed.get()) {
            try {
                if (pipeline.awaitWork(SEAL_POLL_NANOS)) {
                    pipeline.admitEvicted();
                    pipeline.admitWriteThrough();
                    pipeline.sealQueued(SEAL_BATCH_BLOCKS);
                }
            } catch (InterruptedException e) {
                return;
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.ERROR, "sealing failed (bug); the sealer keeps running", e);
            }
        }
    }

    private void requireOpen() {
        if (closed.get()) throw new IllegalStateException("tiered store is closed");
    }

    // Queries of the query layer (no reach-through to the tiers)

    /** Whether DRAM holds {@code key} in {@code namespaceId}, or SSD in {@code namespace}, now; index reads only. */
    public boolean holdsLocally(StateKey key, int namespaceId, io.orbitkv.state.NamespaceDigest namespace) {
        return dram.contains(key, namespaceId) || ssd.contains(key, namespace);
    }

    /** Whether the SSD store indexes {@code key} now (any namespace). */
    public boolean onSsd(StateKey key) {
        return ssd.contains(key);
    }

    /** Lets go of the SSD pin of a {@link #lookup}; false when it was already released. */
    public boolean unpin(Pin pin) {
        return ssd.unpin(pin);
    }

    /** The route key of an SSD read of {@code paddedPayloadBytes} by the store's default route. */
    public io.orbitkv.core.cost.CostKey ssdReadRouteKey(long paddedPayloadBytes) {
        return ssd.readRouteKey(paddedPayloadBytes);
    }

    /** The cost estimate of one SSD read of {@code paddedPayloadBytes}. */
    public io.orbitkv.core.cost.Lookup ssdReadEstimate(long paddedPayloadBytes) {
        return ssd.readEstimate(paddedPayloadBytes);
    }

    /** SSD reads the store runs at once (its I/O threads). */
    public int ssdIoThreads() {
        return ssd.config().ioThreads();
    }

    /** Releases DRAM leases {@code leases[0..n)} in bulk; see {@link DramTier#releaseAll}. */
    public int releaseLeases(Lease[] leases, int n) {
        return dram.releaseAll(leases, n);
    }

    /** The largest DRAM slot, in bytes: no page image can be larger. */
    public int largestSlotBytes() {
        return dram.config().sizeClasses().getLast().slotBytes();
    }

    /** Gives an unsealed DRAM reservation's slot back; false when it was not open. */
    public boolean abort(Reservation reservation) {
        return dram.abort(reservation);
    }

    /** A DRAM lease on {@code key}'s resident image (a use, for the eviction policy), or a miss. */
    public AcquireResult acquire(StateKey key) {
        return dram.acquire(key);
    }

    /** A DRAM lease on {@code key}'s image only while it is still {@code imageId} (not a use), or a miss. */
    public AcquireResult acquireImage(StateKey key, long imageId) {
        return dram.acquireImage(key, imageId);
    }

    /** An SSD pin on {@code key}'s extent, or a miss. */
    public PinResult pin(StateKey key) {
        return ssd.pin(key);
    }

    /** The DRAM arenas of {@code namespaceId}, made on first use; empty when none can be made. */
    public java.util.Optional<io.orbitkv.core.storage.dram.ArenaGeometry> arenasFor(int namespaceId) {
        return dram.arenasFor(namespaceId);
    }

    /** The DRAM tier's arena geometry (slot sizes by class index). */
    public io.orbitkv.core.storage.dram.ArenaGeometry dramGeometry() {
        return dram.geometry();
    }

    /** A consistent snapshot of the DRAM byte accounting. */
    public io.orbitkv.core.storage.dram.DramUsage dramUsage() {
        return dram.usage();
    }

    /** SSD bytes used now. */
    public long ssdUsedBytes() {
        return ssd.usedBytes();
    }

    /** SSD capacity, in bytes. */
    public long ssdCapacityBytes() {
        return ssd.capacityBytes();
    }
}
