package io.orbitkv.core.storage.ssd;

import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.core.cost.CostKey;
import io.orbitkv.core.cost.CostObserver;
import io.orbitkv.core.cost.Lookup;
import io.orbitkv.core.cost.ResourceId;
import io.orbitkv.core.log.RateLimitedLog;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.core.storage.ssd.uring.UringReader;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.IntFunction;

/**
 * The local SSD tier: a crash-safe ring of immutable extents in preallocated files, an
 * in-memory index (namespace, key) → newest extent, generation-exact pins for readers, and a bounded pool
 * of I/O workers doing O_DIRECT reads and writes.
 *
 * <p>Owns the files (through {@link ExtentFiles}), the {@link ExtentIndex}, the ring
 * ({@link ExtentRing}), the {@link ExtentWorkers} (the worker pool and its aligned buffers), one
 * shared {@link Arena} holding the zero-fill buffer and the workers' buffers, and the read route
 * chosen at open ({@link ReadRouteChoice}: positional reads on the workers, or the
 * {@link UringReadRoute}). Both routes verify through {@link ExtentVerifier} and report each
 * executed read to the {@link CostObserver} given at open (off by default). The index appends
 * every commit and drop of an extent to the {@link ResidencyStream} the store was given
 * ({@link ResidencyEvent.Medium#SSD}, generation = extent generation).
 *
 * <p>Lifecycle: {@link #open} (files, I/O mode) → {@link #recover()} once (scan, index) →
 * {@link #write}, {@link #pin}, {@link #read}, {@link #unpin}, {@link #delete} → {@link #close}.
 *
 * <p>Thread model: all public methods are thread-safe. {@code write} and {@code read} only
 * enqueue; the work runs on the {@code ioThreads} workers (reads on the io_uring route: in the
 * kernel, completed by the route's completion owner thread) and the returned future completes
 * there. {@code pin}, {@code unpin} and {@code delete} run on the caller's thread and never
 * block on I/O.
 *
 * <p>Invariants: the index's ({@link ExtentIndex}: one ADDED or REMOVED event per change, a
 * newer generation never replaced by an older one); a pinned extent is never overwritten by the
 * ring until its last pin is released; no byte is served before its CRC32C is checked against a
 * header that names the pinned key, namespace and generation.
 *
 * <p>Design note: pins are per extent generation, not per key, so a reader keeps the exact bytes
 * it looked up even when a newer generation of the key is written meanwhile; the ring skips or
 * waits (bounded, {@code pinnedWaitNanos}) for a pinned extent instead of overwriting it. The
 * index costs ~100 MB per 1 M extents ({@link ExtentIndex}); the write and positional read paths
 * and their measured costs are {@link ExtentWorkers}'.
 */
public final class SsdStore implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(SsdStore.class.getName());
    /** Corrupt extents can repeat at the read rate (a failing device): one line per 10 s. */
    private static final RateLimitedLog FAILURES = RateLimitedLog.tenSeconds(SsdStore.class.getName());
    /** Incarnation source for cost resource identities: each open is a new resource. */
    private static final AtomicLong INCARNATIONS = new AtomicLong();

    private final SsdConfig config;
    private final ExtentFiles files;
    private final ExtentIo extentIo;
    /** {@link #extentIo} itself unless a {@link ExtentDevice.Wrapper} decorated it at open. */
    private final ExtentDevice device;
    private final SsdMetrics metrics;
    private final Arena arena;
    private final MemorySegment zeros;
    private final ExtentIndex index;
    private final ExtentWorkers workers;
    /** Set once in {@link #open} before the store is returned; volatile so no reader sees it half-set. */
    private volatile ReadPath readPath = ReadPath.POSITIONAL;
    /** The io_uring route when {@code readPath == URING}, else null; set once in {@link #open}. */
    private volatile UringReadRoute uring;
    private volatile SsdReadObservations observations;
    private final AtomicLong readerPins = new AtomicLong();
    private volatile ExtentRing ring;

    private SsdStore(SsdConfig config, ExtentFiles files, ResidencyStream residency, MeterRegistry registry,
                     ExtentDevice.Wrapper wrapper) {
        this.config = config;
        this.files = files;
        this.extentIo = ExtentIo.open(files, ExtentIo.Route.VECTORED);
        this.device = Objects.requireNonNull(wrapper.apply(extentIo), "wrapped device");
        String name = config.directory().toString();
        this.metrics = new SsdMetrics(registry, name);
        this.arena = Arena.ofShared();
        this.zeros = arena.allocate(config.preallocChunkBytes(), ExtentLayout.BLOCK_BYTES);
        this.index = new ExtentIndex(residency);
        this.workers = new ExtentWorkers(config, arena, device, index, metrics, this);
        SsdMetrics.gauges(registry, name, this,
                s -> s.workers.queued(),
                s -> s.index.usedBytes(),
                SsdStore::capacityBytes,
                s -> s.readerPins.get(),
                s -> switch (s.files.mode()) {
                    case DIRECT -> 1.0;
                    case BUFFERED -> 0.0;
                });
    }

    /**
     * Opens the store's files (creating missing ones empty; preallocation happens when the ring
     * first enters a file) and chooses O_DIRECT or, if refused and allowed, buffered I/O.
     * Call {@link #recover()} before anything else.
     *
     * @throws IOException when the directory is unusable, or O_DIRECT is refused and
     *                     {@code allowBufferedFallback} is false
     */
    public static SsdStore open(SsdConfig config, ResidencyStream residency, MeterRegistry registry) throws IOException {
        return open(config, residency, registry, CostObserver.disabled());
    }

    /**
     * As {@link #open(SsdConfig, ResidencyStream, MeterRegistry)}, reporting every executed read
     * to {@code observer}, and choosing the read route from {@link SsdConfig#readPath()}:
     * {@link ReadPath#URING} fails closed (an {@link IOException} naming the reason) when
     * io_uring cannot be set up; {@link ReadPath#AUTO} then falls back to positional reads.
     */
    public static SsdStore open(SsdConfig config, ResidencyStream residency, MeterRegistry registry,
                                CostObserver observer) throws IOException {
        String name = config.directory().getFileName() == null ? "ssd" : config.directory().getFileName().toString();
        return open(config, residency, registry, observer, depth -> UringReader.open(depth, name), ExtentDevice.NONE);
    }

    /**
     * As {@link #open(SsdConfig, ResidencyStream, MeterRegistry, CostObserver)} with extent I/O
     * going through {@code wrapper}'s decoration of the store's device (fault injection). A
     * decorated store should read on {@link ReadPath#POSITIONAL}: the io_uring route bypasses it.
     */
    public static SsdStore openDecorated(SsdConfig config, ResidencyStream residency, MeterRegistry registry,
                                         CostObserver observer, ExtentDevice.Wrapper wrapper) throws IOException {
        String name = config.directory().getFileName() == null ? "ssd" : config.directory().getFileName().toString();
        return open(config, residency, registry, observer, depth -> UringReader.open(depth, name), wrapper);
    }

    /** As above with the io_uring capability probe given (tests pretend setup failed). */
    static SsdStore open(SsdConfig config, ResidencyStream residency, MeterRegistry registry, CostObserver observer,
                         IntFunction<UringReader.Open> uringOpener) throws IOException {
        return open(config, residency, registry, observer, uringOpener, ExtentDevice.NONE);
    }

    private static SsdStore open(SsdConfig config, ResidencyStream residency, MeterRegistry registry,
                                 CostObserver observer, IntFunction<UringReader.Open> uringOpener,
                                 ExtentDevice.Wrapper wrapper) throws IOException {
        Objects.requireNonNull(residency, "residency");
        Objects.requireNonNull(registry, "registry");
        Objects.requireNonNull(observer, "observer");
        Objects.requireNonNull(wrapper, "wrapper");
        SsdStore store = new SsdStore(config, ExtentFiles.open(config), residency, registry, wrapper);
        try {
            store.chooseReadRoute(observer, uringOpener);
        } catch (IOException | RuntimeException e) {
            store.close();
            throw e;
        }
        return store;
    }

    private void chooseReadRoute(CostObserver observer, IntFunction<UringReader.Open> opener) throws IOException {
        ResourceId resource = new ResourceId("ssd:" + config.directory(), INCARNATIONS.incrementAndGet());
        ReadRouteChoice choice = ReadRouteChoice.choose(this, config, files, metrics, observer, resource, opener);
        observations = choice.observations();
        switch (choice) {
            case ReadRouteChoice.Positional p -> readPath = ReadPath.POSITIONAL;
            case ReadRouteChoice.Uring(UringReadRoute route, SsdReadObservations ignored) -> {
                uring = route;
                readPath = ReadPath.URING;
            }
        }
        LOG.log(System.Logger.Level.INFO, "SSD store {0}: read path {1} (setting {2}), extent I/O {3}",
                config.directory(), readPath, config.readPath(), extentIo.route());
    }

    /**
     * Scans every file, verifies every extent (header and payload CRC32C), rebuilds the index
     * from the newest intact generation of each key, announces the kept extents as ADDED, and
     * puts the write head after the newest kept extent. Must be called exactly once.
     */
    public synchronized RecoveryReport recover() throws IOException {
        if (ring != null) throw new IllegalStateException("recover() already ran");
        ScanResult scan = ExtentScanner.scan(files, config);
        for (Extent e : scan.live()) index.recovered(e);
        RecoveryReport report = scan.report();
        for (Map.Entry<ExtentDamage, Integer> d : report.dropped().entrySet()) {
            for (int i = 0; i < d.getValue(); i++) metrics.corruptDropped(d.getKey());
        }
        ring = new ExtentRing(files, config, zeros, metrics, scan);
        LOG.log(System.Logger.Level.INFO, "SSD store {0} recovered: {1}", config.directory(), report);
        if (!report.dropped().isEmpty()) {
            LOG.log(System.Logger.Level.WARNING, "SSD store {0}: dropped damaged extents at recovery {1}; they are never "
                    + "served and their pages are recomputed. A torn last write after a crash is expected; more means a "
                    + "failing device or another process writing in {0}: check the kernel log and the disk", config.directory(),
                    report.dropped());
        }
        return report;
    }

    /**
     * Queues a write of the first {@code payloadBytes} bytes of {@code payload} as a new extent
     * of {@code key}. When {@code payload} is 4 KiB aligned and at least the padded length long
     * (a DRAM slot), it goes to the device without a copy; otherwise it is copied into a worker
     * buffer. The caller keeps {@code payload} alive and unchanged until the future completes,
     * and it must be readable from another thread (global, auto or shared arena).
     *
     * @return completes with {@link WriteResult.Committed} once indexed; {@link WriteResult.Busy}
     *         at once when the queue is full
     */
    public CompletableFuture<WriteResult> write(NamespaceDigest namespace, StateKey key, MemorySegment payload,
                                                int payloadBytes) {
        Objects.requireNonNull(namespace, "namespace");
        Objects.requireNonNull(key, "key");
        if (payloadBytes <= 0 || payloadBytes > config.maxPayloadBytes() || payload.byteSize() < payloadBytes) {
            throw new IllegalArgumentException("payloadBytes=" + payloadBytes + " must be in (0, "
                    + config.maxPayloadBytes() + "] and within the segment of " + payload.byteSize() + " B");
        }
        ExtentRing r = requireRecovered();
        return workers.write(r, namespace, key, payload, payloadBytes);
    }

    /**
     * Pins the extent currently indexed for {@code key} in {@code namespace}, exact generation. The
     * ring will not overwrite it until {@link #unpin}. Never blocks.
     */
    public PinResult pin(StateKey key, NamespaceDigest namespace) {
        requireRecovered();
        Extent seen = null;
        for (;;) {
            Extent e = index.get(namespace, key).orElse(null);
            if (e == null || e == seen) return new PinResult.Miss(key);
            if (e.tryPin()) {
                readerPins.incrementAndGet();
                return new Pin(this, e);
            }
            seen = e; // retired by the ring: look once more in case a newer generation replaced it
        }
    }

    /** Releases a pin; returns false when it was already released. */
    public boolean unpin(Pin pin) {
        if (pin.store() != this) throw new IllegalArgumentException("pin of another store: " + pin);
        if (!pin.markReleased()) return false;
        readerPins.decrementAndGet();
        releasePin(pin.extent());
        return true;
    }

    /**
     * Queues a verified read of the pinned extent's payload into the first
     * {@code pin.payloadBytes()} bytes of {@code destination}. When {@code destination} is
     * 4 KiB aligned, native and at least {@link Pin#paddedPayloadBytes()} long, the device
     * writes straight into it; otherwise the store's aligned bounce buffer is used and the
     * verified payload copied. Only {@link ReadResult.Served} means the bytes are valid.
     *
     * <p>The route is the one chosen at open ({@link #readPath()}) or, with setting {@code auto}
     * and {@code ORBITKV_COST_SELECTION=1}, the other route when the guarded rule picks it; both read the same pinned
     * extent generation and apply the same checks. Cancelling the returned future does not stop
     * the physical read: {@code destination} must stay valid until the future completes or, if
     * cancelled, until {@link #uringInflight()} no longer counts it (the io_uring route keeps its
     * own buffers and an extent pin until the kernel's completion arrives).
     */
    public CompletableFuture<ReadResult> read(Pin pin, MemorySegment destination) {
        if (pin.store() != this) throw new IllegalArgumentException("pin of another store: " + pin);
        if (destination.byteSize() < pin.payloadBytes()) {
            throw new IllegalArgumentException("destination of " + destination.byteSize() + " B is shorter than the payload of "
                    + pin.payloadBytes() + " B");
        }
        long enqueuedNanos = observations.enabled() ? System.nanoTime() : 0;
        UringReadRoute u = uring;
        if (u != null && routeFor(pin) == ReadPath.URING) return u.read(pin, destination, enqueuedNanos);
        return workers.read(pin, destination, enqueuedNanos, observations);
    }

    /**
     * io_uring (the open route) unless the setting is {@code auto}, guarded selection is on
     * and positional reads of this extent's shape are measured faster by the margin. A forced
     * route ({@code positional}/{@code uring}) is an ablation and is never switched.
     */
    private ReadPath routeFor(Pin pin) {
        if (config.readPath() != ReadPath.AUTO) return ReadPath.URING;
        return observations.choose(ReadPath.URING, pin.extent());
    }

    /** Removes {@code key}'s extent of {@code namespace} from the index (REMOVED event); pinned readers keep their bytes. */
    public boolean delete(StateKey key, NamespaceDigest namespace) {
        requireRecovered();
        return index.get(namespace, key).map(index::remove).orElse(false);
    }

    /**
     * Removes {@code key}'s extents of every namespace from the index; false if none was indexed.
     * Walks the whole index: for operators and tests, never for a client's request.
     */
    public boolean delete(StateKey key) {
        requireRecovered();
        boolean removed = false;
        for (Extent e : index.extentsOf(key)) removed |= index.remove(e);
        return removed;
    }

    /**
     * Whether {@code key} is indexed now in any namespace. Walks the whole index: for operators and
     * tests, never for a client's request (it would tell one namespace about another's pages).
     */
    public boolean contains(StateKey key) {
        return !index.extentsOf(key).isEmpty();
    }

    /**
     * Whether {@code key} is indexed now as an extent of {@code namespace}. An extent of the same key
     * bytes in another namespace is another extent: it neither counts here nor is replaced by this
     * namespace's write of the key.
     */
    public boolean contains(StateKey key, NamespaceDigest namespace) {
        return index.get(namespace, key).isPresent();
    }

    /**
     * Whether {@code key} is indexed as an extent of {@code namespace} that lies in the oldest
     * {@code fraction} of the ring: the part the write head overwrites next. The on-evict admission
     * writes such a page again when DRAM evicts it, so a page read from SSD and used again moves to
     * the young end of the ring instead of aging out while hot (a FIFO ring with reinsertion).
     */
    public boolean isAgeing(StateKey key, NamespaceDigest namespace, double fraction) {
        ExtentRing r = ring;
        return r != null && index.get(namespace, key)
                .filter(e -> r.bytesAhead(e) < fraction * r.usableBytes()).isPresent();
    }

    /** The keys indexed now, a weakly consistent copy (see {@code DramTier#residentKeys}). */
    public List<StateKey> residentKeys() {
        return index.keys();
    }

    /** Number of indexed extents. */
    public int size() {
        return index.size();
    }

    /** The route serving reads: {@link ReadPath#POSITIONAL} or {@link ReadPath#URING}, never AUTO. */
    public ReadPath readPath() {
        return readPath;
    }

    /**
     * The route key that a read of one extent with {@code paddedPayloadBytes} of padded payload
     * trains on this store's default route ({@link #readPath}): complete-route samples
     * (enqueue → terminal), target HOST_READY, shape = the extent footprint in one fragment.
     */
    public CostKey readRouteKey(long paddedPayloadBytes) {
        return observations.key(readPath, ExtentLayout.HEADER_BYTES + paddedPayloadBytes);
    }

    /**
     * The estimator's view of one such read on the default route: {@link Lookup.Missing} when
     * observations are off. Takes the estimator's lock briefly; for planners, not I/O threads.
     */
    public Lookup readEstimate(long paddedPayloadBytes) {
        return observations.observer().estimate(readRouteKey(paddedPayloadBytes));
    }

    /** How extents are written and positionally read: one vectored call, or two where libc is not reachable. */
    ExtentIo.Route extentIoRoute() {
        return extentIo.route();
    }

    /** io_uring reads submitted and not yet completed (0 on the positional route). */
    public int uringInflight() {
        UringReadRoute u = uring;
        return u == null ? 0 : u.inflight();
    }

    public IoMode ioMode() {
        return files.mode();
    }

    /** Pins handed out by {@link #pin} and not yet unpinned (the ring writer's own pins excluded). */
    public long readerPins() {
        return readerPins.get();
    }

    /** On-disk footprint of the indexed extents, in bytes. */
    public long usedBytes() {
        return index.usedBytes();
    }

    /** Bytes the ring may use: the configured capacity, less files that could not be preallocated. */
    public long capacityBytes() {
        ExtentRing r = ring;
        return r == null ? config.capacityBytes() : r.usableBytes();
    }

    public SsdConfig config() {
        return config;
    }

    /** The cost route key a read of {@code pin} by {@code route} is recorded under (tests inject samples with it). */
    io.orbitkv.core.cost.CostKey costKey(ReadPath route, Pin pin) {
        return observations.key(route, pin.extent());
    }

    /** The indexed extents, for invariant checks in tests. */
    List<Extent> indexedExtents() {
        return index.extents();
    }

    /** The ring, for invariant checks in tests; null before {@link #recover()}. */
    ExtentRing ring() {
        return ring;
    }

    /** Stops accepting work, waits for queued operations (bounded), closes files and buffers. */
    @Override
    public void close() {
        UringReadRoute u = uring;
        if (u != null) u.close();
        workers.close();
        extentIo.close();
        files.close();
        arena.close();
    }

    // ---- shared by both read routes and the workers ----------------------------------------

    /** Drops a damaged extent from the index (once) and answers {@link ReadResult.Corrupt}; any route. */
    ReadResult corrupt(Extent e, ExtentDamage damage) {
        if (index.remove(e)) metrics.corruptDropped(damage);
        FAILURES.log(System.Logger.Level.WARNING, "corrupt", "SSD extent " + e + " failed verification (" + damage
                + "): dropped, never served; its page is recomputed. Repeated drops mean a failing device or another "
                + "process writing in " + config.directory() + ": check the kernel log and the disk");
        return new ReadResult.Corrupt(damage);
    }

    /** Drops one pin of {@code e}; the last one lets a waiting ring writer proceed. Any route. */
    void releasePin(Extent e) {
        if (e.unpin()) {
            ExtentRing r = ring;
            if (r != null) r.onLastUnpin();
        }
    }

    private ExtentRing requireRecovered() {
        ExtentRing r = ring;
        if (r == null) throw new IllegalStateException("call recover() before using the store");
        return r;
    }
}
