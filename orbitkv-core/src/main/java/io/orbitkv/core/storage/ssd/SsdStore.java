package io.orbitkv.core.storage.ssd;

import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.core.storage.ResidencyEvent;
import io.orbitkv.core.storage.ResidencyStream;
import io.orbitkv.state.StateKey;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * The local SSD tier: a crash-safe ring of immutable extents in preallocated files, an
 * in-memory index key → newest extent, generation-exact pins for readers, and a bounded pool
 * of I/O workers doing O_DIRECT reads and writes.
 *
 * <p>Owns the files (through {@link ExtentFiles}), the index, the ring ({@link ExtentRing}),
 * the worker pool and one shared {@link Arena} holding the zero-fill buffer and one pair of
 * aligned bounce buffers per worker. Appends every commit and drop of an extent to the
 * {@link ResidencyStream} it was given ({@link ResidencyEvent.Medium#SSD}, generation =
 * extent generation).
 *
 * <p>Lifecycle: {@link #open} (files, I/O mode) → {@link #recover()} once (scan, index) →
 * {@link #write}, {@link #pin}, {@link #read}, {@link #unpin}, {@link #delete} → {@link #close}.
 *
 * <p>Thread model: all public methods are thread-safe. {@code write} and {@code read} only
 * enqueue; the work runs on the {@code ioThreads} workers and the returned future completes
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
 * corrupt one out. Writes are two positional writes (payload, then header) rather than one
 * gathering write, because {@code FileChannel} has no positional gathering write and a
 * channel-position write would serialise all writers on one file.
 */
public final class SsdStore implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(SsdStore.class.getName());
    private static final long CLOSE_WAIT_SECONDS = 10;

    /** One worker's aligned buffers: a header block and a padded max-size payload. */
    private record IoBuffers(MemorySegment header, MemorySegment payload) {}

    private final SsdConfig config;
    private final ExtentFiles files;
    private final ResidencyStream residency;
    private final SsdMetrics metrics;
    private final Arena arena;
    private final MemorySegment zeros;
    private final ThreadPoolExecutor workers;
    private final ArrayBlockingQueue<IoBuffers> buffers;
    private final ConcurrentHashMap<StateKey, Extent> index = new ConcurrentHashMap<>();
    private final AtomicLong usedBytes = new AtomicLong();
    private final AtomicLong readerPins = new AtomicLong();
    private volatile ExtentRing ring;

    private SsdStore(SsdConfig config, ExtentFiles files, ResidencyStream residency, MeterRegistry registry) {
        this.config = config;
        this.files = files;
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
        Objects.requireNonNull(residency, "residency");
        Objects.requireNonNull(registry, "registry");
        return new SsdStore(config, ExtentFiles.open(config), residency, registry);
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
            residency.append(e.key, ResidencyEvent.Medium.SSD, ResidencyEvent.Kind.ADDED, e.generation);
        }
        RecoveryReport report = scan.report();
        for (Map.Entry<ExtentDamage, Integer> d : report.dropped().entrySet()) {
            for (int i = 0; i < d.getValue(); i++) metrics.corruptDropped(d.getKey());
        }
        ring = new ExtentRing(files, config, zeros, metrics, scan);
        LOG.log(System.Logger.Level.INFO, "SSD store {0} recovered: {1}", config.directory(), report);
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
     */
    public CompletableFuture<ReadResult> read(Pin pin, MemorySegment destination) {
        if (pin.store() != this) throw new IllegalArgumentException("pin of another store: " + pin);
        if (destination.byteSize() < pin.payloadBytes()) {
            throw new IllegalArgumentException("destination of " + destination.byteSize() + " B is shorter than the payload of "
                    + pin.payloadBytes() + " B");
        }
        return submit(() -> doRead(pin, destination), ReadResult.Busy::new, ReadResult.Failed::new);
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

    /** The keys indexed now, a weakly consistent copy (see {@code DramTier#residentKeys}). */
    public List<StateKey> residentKeys() {
        return List.copyOf(index.keySet());
    }

    /** Number of indexed extents. */
    public int size() {
        return index.size();
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
            files.write(placed.file, placed.offset + ExtentLayout.HEADER_BYTES, source);
            ExtentLayout.encodeHeader(buf.header(), placed.header());
            files.write(placed.file, placed.offset, buf.header());
        } catch (IOException e) {
            if (ExtentFiles.isNoSpace(e)) {
                metrics.error(SsdMetrics.ErrorKind.NO_SPACE);
                return new WriteResult.NoSpace();
            }
            metrics.error(SsdMetrics.ErrorKind.IO);
            LOG.log(System.Logger.Level.WARNING, "SSD write of " + placed + " failed", e);
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
        usedBytes.addAndGet(placed.footprintBytes());
        residency.append(placed.key, ResidencyEvent.Medium.SSD, ResidencyEvent.Kind.ADDED, placed.generation);
        if (replaced[0] != null) {
            usedBytes.addAndGet(-replaced[0].footprintBytes());
            residency.append(placed.key, ResidencyEvent.Medium.SSD, ResidencyEvent.Kind.REMOVED, replaced[0].generation);
        }
    }

    private ReadResult doRead(Pin pin, MemorySegment destination) throws IOException {
        if (pin.isReleased()) return new ReadResult.Released();
        Extent e = pin.extent();
        long padded = ExtentLayout.paddedPayloadBytes(e.payloadBytes);
        IoBuffers buf = takeBuffers();
        try {
            if (files.read(e.file, e.offset, buf.header()) < ExtentLayout.HEADER_BYTES) {
                return corrupt(e, ExtentDamage.TRUNCATED);
            }
            switch (ExtentLayout.decodeHeader(buf.header(), config.maxPayloadBytes())) {
                case ExtentLayout.HeaderDecode.NotAHeader() -> {
                    return corrupt(e, ExtentDamage.MISSING_HEADER);
                }
                case ExtentLayout.HeaderDecode.Damaged(ExtentDamage damage, long ignored) -> {
                    return corrupt(e, damage);
                }
                case ExtentLayout.HeaderDecode.Valid(ExtentHeader h) -> {
                    if (!h.equals(e.header())) return corrupt(e, ExtentDamage.IDENTITY_MISMATCH);
                }
            }
            boolean direct = isDirectCapable(destination, padded);
            MemorySegment target = direct ? destination.asSlice(0, padded) : buf.payload().asSlice(0, padded);
            if (files.read(e.file, e.offset + ExtentLayout.HEADER_BYTES, target) < e.payloadBytes) {
                return corrupt(e, ExtentDamage.TRUNCATED);
            }
            if (ExtentLayout.crc32c(target, e.payloadBytes) != e.payloadCrc32c) {
                return corrupt(e, ExtentDamage.BAD_PAYLOAD_CRC);
            }
            if (!direct) {
                MemorySegment.copy(target, 0, destination, 0, e.payloadBytes);
                metrics.bounceCopy();
            }
            metrics.read(e.payloadBytes);
            return new ReadResult.Served(e.payloadBytes, !direct);
        } finally {
            buffers.add(buf);
        }
    }

    private ReadResult corrupt(Extent e, ExtentDamage damage) {
        if (removeFromIndex(e)) metrics.corruptDropped(damage);
        LOG.log(System.Logger.Level.WARNING, "SSD extent {0} failed verification: {1}", e, damage);
        return new ReadResult.Corrupt(damage);
    }

    // ---- shared helpers --------------------------------------------------------------------

    /** Removes exactly this extent from the index; true (and one REMOVED event) only for the remover that won. */
    private boolean removeFromIndex(Extent e) {
        if (!index.remove(e.key, e)) return false;
        usedBytes.addAndGet(-e.footprintBytes());
        residency.append(e.key, ResidencyEvent.Medium.SSD, ResidencyEvent.Kind.REMOVED, e.generation);
        return true;
    }

    private void releasePin(Extent e) {
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
                    LOG.log(System.Logger.Level.WARNING, "SSD I/O failed in " + config.directory(), e);
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
