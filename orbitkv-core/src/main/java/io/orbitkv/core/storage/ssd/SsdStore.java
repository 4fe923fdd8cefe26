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
import java.util.Optional;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import java.util.function.IntFunction;
import java.util.function.Supplier;

/**
 * The local SSD tier: a crash-safe ring of immutable extents in preallocated files, an
 * in-memory index key → newest extent, generation-exact pins for readers, and a bounded pool
 * of I/O workers doing O_DIRECT reads and writes.
 *
 * <p>Owns the files (through {@link ExtentFiles}), the index, the ring ({@link ExtentRing}),
 * the worker pool, one shared {@link Arena} holding the zero-fill buffer and one pair of
 * aligned bounce buffers per worker, and the read route chosen at open
 * ({@link ReadRouteChoice}: positional reads on the workers, or the {@link UringReadRoute}).
 * Both routes verify through {@link ExtentVerifier} and report each executed read to the
 * {@link CostObserver} given at open (off by default). Appends every commit and drop of an extent to the
 * {@link ResidencyStream} it was given ({@link ResidencyEvent.Medium#SSD}, generation =
 * extent generation).
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
 * <p>Invariants: an index entry is an extent whose header and payload were written (or
 * verified at recovery) and not yet claimed by the ring, deleted or found corrupt; each index
 * insertion is followed by exactly one ADDED event and each removal by exactly one REMOVED
 * event (removals use {@code remove(key, extent)}, so two removers cannot both win);
 * {@code usedBytes} is the sum of indexed footprints; no byte is served before its CRC32C is
 * checked against a header that names the pinned key, namespace and generation.
 *
 * <p>Design note: the index is a {@link ConcurrentHashMap} of about 56-byte {@link Extent}
 * entries plus ~40 bytes of node, ~100 MB for 1 M extents (64 GiB of 64 KiB pages); it is
 * bounded by the ring (an extent leaves the index before its bytes are reused). Delete and
 * corruption drops are in memory only: keys are content digests, so an extent that reappears
 * after a restart is still a correct image of its key, and re-verification at recovery keeps a
 * corrupt one out. An extent is written and (on the positional route) read by
 * {@link ExtentIo}: one vectored positional call ({@code pwritev}/{@code preadv} of header and
 * payload) where libc is reachable, two positional calls otherwise (the benchmark measured the
 * second dependent call at up to 15% of write and 30-40% of QD 1 read throughput).
 */
public final class SsdStore implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(SsdStore.class.getName());
    /** Failures that repeat at the I/O rate (a full disk, a failing device): one line per kind per 10 s. */
    private static final RateLimitedLog FAILURES = RateLimitedLog.tenSeconds(SsdStore.class.getName());
    private static final long CLOSE_WAIT_SECONDS = 10;
    /** Incarnation source for cost resource identities: each open is a new resource. */
    private static final AtomicLong INCARNATIONS = new AtomicLong();

    /** One worker's aligned buffers: a header block and a padded max-size payload. */
    private record IoBuffers(MemorySegment header, MemorySegment payload) {}

    private final SsdConfig config;
    private final ExtentFiles files;
    private final ExtentIo extentIo;
    /** {@link #extentIo} itself unless a {@link ExtentDevice.Wrapper} decorated it at open. */
    private final ExtentDevice device;
    private final ResidencyStream residency;
    private final SsdMetrics metrics;
    private final Arena arena;
    private final MemorySegment zeros;
    private final ThreadPoolExecutor workers;
    private final ArrayBlockingQueue<IoBuffers> buffers;
    private final ConcurrentHashMap<StateKey, Extent> index = new ConcurrentHashMap<>();
    /** Set once in {@link #open} before the store is returned; volatile so no reader sees it half-set. */
    private volatile ReadPath readPath = ReadPath.POSITIONAL;
    /** The io_uring route when {@code readPath == URING}, else null; set once in {@link #open}. */
    private volatile UringReadRoute uring;
    private volatile SsdReadObservations observations;
    private final AtomicLong usedBytes = new AtomicLong();
    private final AtomicLong readerPins = new AtomicLong();
    private volatile ExtentRing ring;

    private SsdStore(SsdConfig config, ExtentFiles files, ResidencyStream residency, MeterRegistry registry,
                     ExtentDevice.Wrapper wrapper) {
        this.config = config;
        this.files = files;
        this.extentIo = ExtentIo.open(files, ExtentIo.Route.VECTORED);
        this.device = Objects.requireNonNull(wrapper.apply(extentIo), "wrapped device");
        this.residency = residency;
        String name = config.directory().toString();
        this.metrics = new SsdMetrics(registry, name);
        this.arena = Arena.ofShared();
        this.zeros = arena.allocate(config.preallocChunkBytes(), ExtentLayout.BLOCK_BYTES);
        long paddedMax = ExtentLayout.paddedPayloadBytes(config.maxPayloadBytes());
        this.buffers = new ArrayBlockingQueue<>(config.ioThreads());
        for (int i = 0; i < config.ioThreads(); i++) {
            buffers.add(new IoBuffers(arena.allocate(ExtentLayout.HEADER_BYTES, ExtentLayout.BLOCK_BYTES),
                    arena.allocate(paddedMax, ExtentLayout.BLOCK_BYTES)));
        }
        AtomicInteger threadIds = new AtomicInteger();
        this.workers = new ThreadPoolExecutor(config.ioThreads(), config.ioThreads(), 0, TimeUnit.MILLISECONDS,
                new ArrayBlockingQueue<>(config.maxQueuedOps()), r -> {
                    Thread t = new Thread(r, "orbitkv-ssd-io-" + threadIds.incrementAndGet());
                    t.setDaemon(true);
                    return t;
                });
        SsdMetrics.gauges(registry, name, this,
                s -> s.workers.getQueue().size(),
                s -> s.usedBytes.get(),
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
        for (Extent e : scan.live()) {
            index.put(e.key, e);
            usedBytes.addAndGet(e.footprintBytes());
            residency.append(e.key, ResidencyEvent.Medium.SSD, ResidencyEvent.Kind.ADDED, e.generation, e.payloadBytes);
            residency.retainedOnSsd(e.namespace, e.key, ResidencyEvent.Kind.ADDED, e.payloadBytes);
        }
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
        return submit(() -> doWrite(r, namespace, key, payload, payloadBytes), WriteResult.Busy::new,
                WriteResult.Failed::new);
    }

    /**
     * Pins the extent currently indexed for {@code key}, exact generation. The ring will not
     * overwrite it until {@link #unpin}. Never blocks.
     */
    public PinResult pin(StateKey key) {
        requireRecovered();
        Extent seen = null;
        for (;;) {
            Extent e = index.get(key);
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
        return submit(() -> doRead(pin, destination, enqueuedNanos), ReadResult.Busy::new, ReadResult.Failed::new);
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

    /** Removes {@code key} from the index (REMOVED event); pinned readers keep their bytes. */
    public boolean delete(StateKey key) {
        requireRecovered();
        Extent e = index.get(key);
        return e != null && removeFromIndex(e);
    }

    /** Whether {@code key} is indexed now. */
    public boolean contains(StateKey key) {
        return index.containsKey(key);
    }

    /**
     * Whether {@code key} is indexed now as an extent of {@code namespace}. An extent of the same key
     * bytes in another namespace does not count: the next write of the key replaces it (a newer
     * generation wins), so no namespace can keep another's page off the SSD by writing its key first.
     */
    public boolean contains(StateKey key, NamespaceDigest namespace) {
        Extent e = index.get(key);
        return e != null && e.namespace.equals(namespace);
    }

    /**
     * Whether {@code key} is indexed as an extent of {@code namespace} that lies in the oldest
     * {@code fraction} of the ring: the part the write head overwrites next. The on-evict admission
     * writes such a page again when DRAM evicts it, so a page read from SSD and used again moves to
     * the young end of the ring instead of aging out while hot (a FIFO ring with reinsertion).
     */
    public boolean isAgeing(StateKey key, NamespaceDigest namespace, double fraction) {
        Extent e = index.get(key);
        ExtentRing r = ring;
        return e != null && r != null && e.namespace.equals(namespace) && r.bytesAhead(e) < fraction * r.usableBytes();
    }

    /** The keys indexed now, a weakly consistent copy (see {@code DramTier#residentKeys}). */
    public List<StateKey> residentKeys() {
        return List.copyOf(index.keySet());
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
        return usedBytes.get();
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
        return List.copyOf(index.values());
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
        workers.shutdown();
        try {
            if (!workers.awaitTermination(CLOSE_WAIT_SECONDS, TimeUnit.SECONDS)) {
                LOG.log(System.Logger.Level.WARNING, "SSD store {0}: I/O workers still busy after {1} s; closing anyway",
                        config.directory(), CLOSE_WAIT_SECONDS);
                workers.shutdownNow();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        extentIo.close();
        files.close();
        arena.close();
    }

    // ---- worker side -----------------------------------------------------------------------

    private WriteResult doWrite(ExtentRing r, NamespaceDigest namespace, StateKey key, MemorySegment payload,
                                int payloadBytes) throws IOException {
        int crc = ExtentLayout.crc32c(payload, payloadBytes);
        ExtentRing.Placement placement = r.place(namespace, key, payloadBytes, crc);
        return switch (placement) {
            case ExtentRing.Placement.NoSpace() -> {
                metrics.error(SsdMetrics.ErrorKind.NO_SPACE);
                yield new WriteResult.NoSpace();
            }
            case ExtentRing.Placement.RingFull() -> {
                metrics.error(SsdMetrics.ErrorKind.RING_FULL);
                yield new WriteResult.RingFull();
            }
            case ExtentRing.Placement.Placed(Extent placed, List<Extent> claimed) -> {
                try {
                    for (Extent c : claimed) removeFromIndex(c);
                    yield writePlaced(placed, payload);
                } finally {
                    releasePin(placed); // the writer's in-flight pin
                }
            }
        };
    }

    private WriteResult writePlaced(Extent placed, MemorySegment payload) {
        IoBuffers buf = takeBuffers();
        try {
            long padded = ExtentLayout.paddedPayloadBytes(placed.payloadBytes);
            MemorySegment source;
            if (isDirectCapable(payload, padded)) {
                source = payload.asSlice(0, padded);
            } else {
                source = buf.payload().asSlice(0, padded);
                MemorySegment.copy(payload, 0, source, 0, placed.payloadBytes);
                source.asSlice(placed.payloadBytes).fill((byte) 0);
                metrics.bounceCopy();
            }
            ExtentLayout.encodeHeader(buf.header(), placed.header());
            device.write(placed.file, placed.offset, buf.header(), source);
        } catch (IOException e) {
            if (ExtentFiles.isNoSpace(e)) {
                metrics.error(SsdMetrics.ErrorKind.NO_SPACE);
                FAILURES.log(System.Logger.Level.ERROR, "no-space", "SSD store " + config.directory() + ": disk full "
                        + "writing an extent (" + e.getMessage() + "); new pages stay in DRAM only. Free space on that file "
                        + "system or lower ssdBytes; the extent files are preallocated, so another process is filling it");
                return new WriteResult.NoSpace();
            }
            metrics.error(SsdMetrics.ErrorKind.IO);
            FAILURES.log(System.Logger.Level.WARNING, "write", "SSD write of " + placed + " failed: " + e
                    + "; the page stays in DRAM only. Check the device (kernel log) if this repeats");
            return new WriteResult.Failed(e.toString());
        } finally {
            buffers.add(buf);
        }
        publish(placed);
        metrics.write(placed.footprintBytes());
        return new WriteResult.Committed(placed.key, placed.generation);
    }

    /** Indexes a written extent unless a newer generation of its key is already indexed. */
    private void publish(Extent placed) {
        Extent[] replaced = new Extent[1];
        boolean[] won = new boolean[1];
        index.compute(placed.key, (k, old) -> {
            if (old != null && old.generation > placed.generation) return old;
            replaced[0] = old;
            won[0] = true;
            return placed;
        });
        if (!won[0]) return;
        // The replaced generation's REMOVED goes first: a follower that applies events in order (the
        // catalog mirror, KV events) must end with the key present, not removed.
        if (replaced[0] != null) {
            usedBytes.addAndGet(-replaced[0].footprintBytes());
            residency.append(placed.key, ResidencyEvent.Medium.SSD, ResidencyEvent.Kind.REMOVED, replaced[0].generation, replaced[0].payloadBytes);
            residency.retainedOnSsd(replaced[0].namespace, placed.key, ResidencyEvent.Kind.REMOVED, replaced[0].payloadBytes);
        }
        usedBytes.addAndGet(placed.footprintBytes());
        residency.append(placed.key, ResidencyEvent.Medium.SSD, ResidencyEvent.Kind.ADDED, placed.generation, placed.payloadBytes);
        residency.retainedOnSsd(placed.namespace, placed.key, ResidencyEvent.Kind.ADDED, placed.payloadBytes);
    }

    private ReadResult doRead(Pin pin, MemorySegment destination, long enqueuedNanos) throws IOException {
        if (pin.isReleased()) return new ReadResult.Released();
        Extent e = pin.extent();
        long padded = ExtentLayout.paddedPayloadBytes(e.payloadBytes);
        IoBuffers buf = takeBuffers();
        long submittedNanos = observations.enabled() ? System.nanoTime() : 0;
        ReadResult result = new ReadResult.Failed("I/O error before the read finished");
        try {
            boolean direct = isDirectCapable(destination, padded);
            MemorySegment target = direct ? destination.asSlice(0, padded) : buf.payload().asSlice(0, padded);
            // One call for header and payload: nothing is served before both checks below pass.
            ExtentDevice.ReadBytes got = device.read(e.file, e.offset, buf.header(), target);
            Optional<ExtentDamage> damage = ExtentVerifier.header(buf.header(), got.headerBytes(), e,
                    config.maxPayloadBytes());
            if (damage.isPresent()) return result = corrupt(e, damage.get());
            damage = ExtentVerifier.payload(target, got.payloadBytes(), e);
            if (damage.isPresent()) return result = corrupt(e, damage.get());
            if (!direct) {
                MemorySegment.copy(target, 0, destination, 0, e.payloadBytes);
                metrics.bounceCopy();
            }
            metrics.read(e.payloadBytes);
            return result = new ReadResult.Served(e.payloadBytes, !direct);
        } finally {
            buffers.add(buf);
            if (observations.enabled()) {
                observations.executed(ReadPath.POSITIONAL, e, result, false, enqueuedNanos, submittedNanos,
                        System.nanoTime());
            }
        }
    }

    /** Drops a damaged extent from the index (once) and answers {@link ReadResult.Corrupt}; any route. */
    ReadResult corrupt(Extent e, ExtentDamage damage) {
        if (removeFromIndex(e)) metrics.corruptDropped(damage);
        FAILURES.log(System.Logger.Level.WARNING, "corrupt", "SSD extent " + e + " failed verification (" + damage
                + "): dropped, never served; its page is recomputed. Repeated drops mean a failing device or another "
                + "process writing in " + config.directory() + ": check the kernel log and the disk");
        return new ReadResult.Corrupt(damage);
    }

    // ---- shared helpers --------------------------------------------------------------------

    /** Removes exactly this extent from the index; true (and one REMOVED event) only for the remover that won. */
    private boolean removeFromIndex(Extent e) {
        if (!index.remove(e.key, e)) return false;
        usedBytes.addAndGet(-e.footprintBytes());
        residency.append(e.key, ResidencyEvent.Medium.SSD, ResidencyEvent.Kind.REMOVED, e.generation, e.payloadBytes);
        residency.retainedOnSsd(e.namespace, e.key, ResidencyEvent.Kind.REMOVED, e.payloadBytes);
        return true;
    }

    /** Drops one pin of {@code e}; the last one lets a waiting ring writer proceed. Any route. */
    void releasePin(Extent e) {
        if (e.unpin()) {
            ExtentRing r = ring;
            if (r != null) r.onLastUnpin();
        }
    }

    private static boolean isDirectCapable(MemorySegment segment, long paddedBytes) {
        return segment.isNative() && segment.address() % ExtentLayout.BLOCK_BYTES == 0
                && segment.byteSize() >= paddedBytes;
    }

    private IoBuffers takeBuffers() {
        IoBuffers b = buffers.poll();
        if (b == null) throw new IllegalStateException("more concurrent I/O tasks than worker buffers");
        return b;
    }

    private ExtentRing requireRecovered() {
        ExtentRing r = ring;
        if (r == null) throw new IllegalStateException("call recover() before using the store");
        return r;
    }

    /** Worker body that may fail with an I/O error. */
    private interface IoTask<T> {
        T run() throws IOException;
    }

    private <T> CompletableFuture<T> submit(IoTask<T> task, Supplier<T> busy,
                                            Function<String, T> failed) {
        if (workers.isShutdown()) throw new IllegalStateException("store closed: " + config.directory());
        CompletableFuture<T> result = new CompletableFuture<>();
        try {
            workers.execute(() -> {
                try {
                    result.complete(task.run());
                } catch (IOException e) {
                    metrics.error(SsdMetrics.ErrorKind.IO);
                    FAILURES.log(System.Logger.Level.WARNING, "io", "SSD I/O failed in " + config.directory() + ": " + e
                            + "; the operation is answered as failed (a miss). Check the device (kernel log) if this repeats");
                    result.complete(failed.apply(e.toString()));
                } catch (RuntimeException | Error e) {
                    LOG.log(System.Logger.Level.ERROR, "SSD worker task failed (bug)", e);
                    result.completeExceptionally(e);
                }
            });
        } catch (RejectedExecutionException e) {
            metrics.error(SsdMetrics.ErrorKind.BUSY);
            result.complete(busy.get());
        }
        return result;
    }
}
