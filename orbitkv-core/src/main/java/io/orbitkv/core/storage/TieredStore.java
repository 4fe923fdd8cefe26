package io.orbitkv.core.storage;

import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.core.cost.CostKey;
import io.orbitkv.core.cost.CostObserver;
import io.orbitkv.core.cost.Lookup;
import io.orbitkv.core.log.UnexpectedErrors;
import io.orbitkv.core.namespace.NamespaceTable;
import io.orbitkv.core.namespace.TenantTable;
import io.orbitkv.core.storage.dram.AcquireResult;
import io.orbitkv.core.storage.dram.ArenaGeometry;
import io.orbitkv.core.storage.dram.CommitResult;
import io.orbitkv.core.storage.dram.DramTier;
import io.orbitkv.core.storage.dram.DramUsage;
import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.core.storage.dram.Reservation;
import io.orbitkv.core.storage.dram.ReserveResult;
import io.orbitkv.core.storage.publish.PageSource;
import io.orbitkv.core.storage.publish.PublishPipeline;
import io.orbitkv.core.storage.publish.PublishResult;
import io.orbitkv.core.storage.publish.SsdIoDispatcher;
import io.orbitkv.core.storage.publish.TenantSsdLedger;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.core.storage.residency.RetentionLedger;
import io.orbitkv.core.storage.ssd.ExtentDevice;
import io.orbitkv.core.storage.ssd.Pin;
import io.orbitkv.core.storage.ssd.PinResult;
import io.orbitkv.core.storage.ssd.RecoveryReport;
import io.orbitkv.core.storage.ssd.SsdStore;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;

import java.io.IOException;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.LongSupplier;

/**
 * The Manager's local storage as one thing: the {@link DramTier}, the {@link SsdStore}, the
 * {@link PublishPipeline} and the {@link SsdIoDispatcher} in front of the store, wired to one
 * {@link ResidencyStream}. This is what the query layer calls: {@link #lookup} (where are the
 * bytes now), {@link #stage} (bring them into DRAM and lease them), {@link #publish} and the
 * zero-copy {@link #reserve}/{@link #commit} (add a block).
 *
 * <p>Owns all four components, the {@link StagingTable} (the bounded table of in-flight
 * stagings, each key's one backing SSD read, and the staging queue) and the sealing thread.
 *
 * <p>Thread model: all public methods are thread-safe and never block on I/O; staging completes
 * its future on an SSD worker thread (or at once for a DRAM hit or a refusal). The sealing
 * thread (a platform thread, {@code orbitkv-sealer-<arena>}) runs {@link PublishPipeline#sealQueued}
 * and {@link PublishPipeline#admitEvicted}.
 * {@link #close()} stops intake and the sealer, drops blocks not yet sealed (counted), admits the
 * sealed write-through blocks still waiting, lets queued and in-flight SSD work finish (each step
 * bounded by the publish {@code drainTimeoutNanos}), then closes the store and the DRAM tier.
 *
 * <p>Invariants: the components are opened together and closed together, in that order (a
 * failed open closes what it opened); a lease of a resident image taken by {@link #lookup},
 * {@link #leaseRun} or a staging's first check is reported to the pipeline as a DRAM hit
 * ({@code reuse-aware:N}); the staging bounds and exactly-once rules are {@link StagingTable}'s.
 *
 * <p>Design note: one facade rather than the tiers handed out separately, so the query layer
 * sees one order of lookup (DRAM lease, then SSD pin, then miss) and one place where a hit feeds
 * SSD admission. The sealer is a platform thread because its copy loop (up to 64 blocks per
 * pass, ~10 GB/s per core) is CPU-bound and would hold a virtual thread's carrier without yielding.
 */
public final class TieredStore implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(TieredStore.class.getName());
    private static final long SEAL_POLL_NANOS = TimeUnit.MILLISECONDS.toNanos(100);
    private static final int SEAL_BATCH_BLOCKS = 64;

    private final TieredStoreConfig config;
    private final ResidencyStream residency;
    private final DramTier dram;
    private final SsdStore ssd;
    private final RecoveryReport recovery;
    private final SsdIoDispatcher dispatcher;
    private final PublishPipeline pipeline;
    private final StagingTable stagings;
    private final Thread sealer;
    private final AtomicBoolean closed = new AtomicBoolean();
    private final CostObserver costObserver;

    private TieredStore(TieredStoreConfig config, NamespaceTable namespaces, ResidencyStream residency, DramTier dram,
                        SsdStore ssd, RecoveryReport recovery, MeterRegistry registry, LongSupplier nanoClock,
                        CostObserver observer, TenantSsdLedger tenantSsd) {
        this.config = config;
        this.residency = residency;
        this.dram = dram;
        this.ssd = ssd;
        this.recovery = recovery;
        this.costObserver = observer;
        String storeName = config.ssd().directory().toString();
        this.dispatcher = new SsdIoDispatcher(config.ssd().ioThreads(), config.publish().readLaneOps(),
                config.publish().writeLaneOps(), config.publish().maxReadsWhileWriteWaits(), registry, storeName);
        this.pipeline = new PublishPipeline(dram, ssd, dispatcher, config.publish(), namespaces, registry, nanoClock,
                observer, tenantSsd);
        dram.setEvictionListener(pipeline::onEvicted);
        this.stagings = new StagingTable(config, namespaces, dram, ssd, dispatcher, pipeline, registry);
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
        TenantTable tenants = new TenantTable(config.tenants(), namespaces);
        TenantSsdLedger tenantSsd = new TenantSsdLedger(tenants);
        residency.attach(tenantSsd::onSsd); // before recovery: recovered extents are charged too
        DramTier dram = DramTier.open(config.dram(), residency, registry, tenants);
        SsdStore ssd = null;
        try {
            ssd = SsdStore.openDecorated(config.ssd(), residency, registry, observer, device);
            RecoveryReport recovery = ssd.recover();
            TieredStore store = new TieredStore(config, namespaces, residency, dram, ssd, recovery, registry,
                    nanoClock, observer, tenantSsd);
            store.sealer.start();
            return store;
        } catch (IOException | RuntimeException e) {
            if (ssd != null) ssd.close();
            dram.close();
            throw e;
        }
    }

    /**
     * Where {@code key}'s bytes of namespace {@code namespaceId} ({@code namespace} is its digest)
     * are now: a DRAM lease (counts as a hit), an SSD pin, or a miss. Another namespace's image or
     * extent of the same key bytes is never found.
     */
    public LookupResult lookup(StateKey key, int namespaceId, NamespaceDigest namespace) {
        Objects.requireNonNull(key, "key");
        Objects.requireNonNull(namespace, "namespace");
        requireOpen();
        if (dram.acquire(key, namespaceId) instanceof Lease lease) {
            pipeline.onDramHit(lease);
            return new LookupResult.InDram(lease);
        }
        return switch (ssd.pin(key, namespace)) {
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
     * {@link #lookup} for it (an SSD pin or a miss).
     */
    public int leaseRun(DramTier.RunKeys keyOf, int from, int to, int namespaceId, StateKey[] keys, Lease[] leases) {
        requireOpen();
        int end = dram.acquireRun(keyOf, from, to, namespaceId, keys, leases);
        for (int i = from; i < end; i++) pipeline.onDramHit(leases[i]);
        return end;
    }

    /**
     * A DRAM lease on {@code key}'s image in {@code namespaceId}, reading it from SSD (that
     * namespace's extent) into a fresh DRAM slot if needed.
     * Concurrent stagings of one page share one backing read; each caller gets its own lease.
     * With {@code maxInflightStages} keys in flight a new key waits in the staging queue; only a
     * full queue ({@code maxQueuedStages}) answers {@link StageResult.BusyReason#INFLIGHT_TABLE_FULL}.
     */
    public CompletableFuture<StageResult> stage(StateKey key, int namespaceId) {
        return stagings.stage(key, namespaceId);
    }

    /** Stagings waiting for an in-flight table entry. */
    public int queuedStagings() {
        return stagings.queuedStagings();
    }

    /** Queues a block to be sealed into DRAM (then admitted to SSD by policy). Never blocks. */
    public PublishResult publish(StateKey key, int namespaceId, PageSource source) {
        requireOpen();
        return pipeline.publish(key, namespaceId, source);
    }

    /** Zero-copy publish, step 1: a DRAM slot the engine writes into (see {@link DramTier#reserve}). */
    public ReserveResult reserve(StateKey key, int namespaceId, int lengthBytes) {
        return reserve(key, namespaceId, lengthBytes, null);
    }

    /**
     * As {@link #reserve(StateKey, int, int)} for a publisher that named tenant {@code tenantLabel}
     * (null: none): charged to that tenant's DRAM budget ({@link DramTier#reserve(StateKey, int, int, String)}).
     */
    public ReserveResult reserve(StateKey key, int namespaceId, int lengthBytes, String tenantLabel) {
        requireOpen();
        return dram.reserve(key, namespaceId, lengthBytes, tenantLabel);
    }

    /** Zero-copy publish, step 2: commits the reservation; a new image then goes through SSD admission. */
    public CommitResult commit(Reservation reservation) {
        requireOpen();
        return pipeline.commitAndAdmit(reservation);
    }

    /**
     * Keys resident on {@code medium} now, one per image or extent (a key held in two namespaces
     * twice), a weakly consistent copy (catalog resynchronisation).
     */
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
        return stagings.inflight();
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
        stagings.close();
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
            stagings.removeMeters();
            ssd.close();
            dram.close();
        }
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
                UnexpectedErrors.record(UnexpectedErrors.Layer.STORAGE, "TieredStore.seal",
                        "an unsealed batch (the sealer keeps running)", e);
            }
        }
    }

    private void requireOpen() {
        if (closed.get()) throw new IllegalStateException("tiered store is closed");
    }

    // Queries of the query layer (no reach-through to the tiers)

    /** Whether DRAM holds {@code key} in {@code namespaceId}, or SSD in {@code namespace}, now; index reads only. */
    public boolean holdsLocally(StateKey key, int namespaceId, NamespaceDigest namespace) {
        return dram.contains(key, namespaceId) || ssd.contains(key, namespace);
    }

    /**
     * HINT DROP of {@code key} in one namespace: removes its DRAM image of {@code namespaceId} and
     * its SSD extent of {@code namespace} (REMOVED events for both; leased images and pinned extents
     * keep their bytes until released), and the extent a write pending now would add. Another
     * namespace's copies are untouched. True when either tier held it.
     */
    public boolean drop(StateKey key, int namespaceId, NamespaceDigest namespace) {
        boolean inDram = dram.drop(key, namespaceId);
        pipeline.dropped(key, namespaceId, namespace);
        return ssd.delete(key, namespace) | inDram;
    }

    /** Whether the SSD store indexes {@code key} in {@code namespace} now. */
    public boolean onSsd(StateKey key, NamespaceDigest namespace) {
        return ssd.contains(key, namespace);
    }

    /** Lets go of the SSD pin of a {@link #lookup}; false when it was already released. */
    public boolean unpin(Pin pin) {
        return ssd.unpin(pin);
    }

    /** The route key of an SSD read of {@code paddedPayloadBytes} by the store's default route. */
    public CostKey ssdReadRouteKey(long paddedPayloadBytes) {
        return ssd.readRouteKey(paddedPayloadBytes);
    }

    /** The cost estimate of one SSD read of {@code paddedPayloadBytes}. */
    public Lookup ssdReadEstimate(long paddedPayloadBytes) {
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

    /** A DRAM lease on {@code key}'s image in {@code namespaceId} (a use, for the eviction policy), or a miss. */
    public AcquireResult acquire(StateKey key, int namespaceId) {
        return dram.acquire(key, namespaceId);
    }

    /**
     * A DRAM lease on {@code key}'s image in {@code namespaceId} only while it is still
     * {@code imageId} (not a use), or a miss.
     */
    public AcquireResult acquireImage(StateKey key, int namespaceId, long imageId) {
        return dram.acquireImage(key, namespaceId, imageId);
    }

    /** An SSD pin on {@code key}'s extent of {@code namespace}, or a miss. */
    public PinResult pin(StateKey key, NamespaceDigest namespace) {
        return ssd.pin(key, namespace);
    }

    /** The DRAM arenas of {@code namespaceId}, made on first use; empty when none can be made. */
    public Optional<ArenaGeometry> arenasFor(int namespaceId) {
        return dram.arenasFor(namespaceId);
    }

    /** The DRAM tier's arena geometry (slot sizes by class index). */
    public ArenaGeometry dramGeometry() {
        return dram.geometry();
    }

    /** A consistent snapshot of the DRAM byte accounting. */
    public DramUsage dramUsage() {
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
