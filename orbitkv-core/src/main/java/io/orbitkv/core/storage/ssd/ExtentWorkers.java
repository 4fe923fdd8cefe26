package io.orbitkv.core.storage.ssd;

import io.orbitkv.core.log.RateLimitedLog;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * The {@link SsdStore}'s bounded pool of I/O workers: extent writes (place in the ring, write
 * header and payload, index) and positional reads (read, verify, serve), each on one worker with
 * that worker's pair of aligned buffers.
 *
 * <p>Owns the {@code ioThreads} worker threads ({@code orbitkv-ssd-io-N}, daemons), their bounded
 * queue ({@code maxQueuedOps}) and one header block and one padded max-size payload buffer per
 * worker, allocated in the store's arena (the store owns it and closes it after {@link #close}).
 * Borrows the store's {@link ExtentDevice}, {@link ExtentIndex} and metrics.
 *
 * <p>Thread model: {@link #write} and {@link #read} only enqueue, from any thread; the work runs on
 * a worker and the returned future completes there. A full queue answers Busy at once.
 *
 * <p>Invariants: at most {@code ioThreads} tasks run at once, so a task always finds a free buffer
 * pair and returns it when it ends; an I/O error completes the future with a failed value
 * (counted, logged rate-limited), a bug completes it exceptionally (logged); a written extent is
 * indexed only after both its header and payload were written; no byte is served before its
 * header and CRC32C are checked ({@link ExtentVerifier}).
 *
 * <p>Design note: a payload that is 4 KiB aligned, native and at least the padded length (a DRAM
 * slot) goes to or comes from the device as is; anything else goes through the worker's buffer
 * (one copy, counted as a bounce copy). An extent is written and read by {@link ExtentIo}: one
 * vectored positional call ({@code pwritev}/{@code preadv} of header and payload) where libc is
 * reachable, two positional calls otherwise (the benchmark measured the second dependent call at
 * up to 15% of write and 30-40% of QD 1 read throughput).
 */
final class ExtentWorkers {

    /** Logger name of the store, so operators configure one logger for the whole SSD tier. */
    private static final String LOGGER = SsdStore.class.getName();
    private static final System.Logger LOG = System.getLogger(LOGGER);
    /** Failures that repeat at the I/O rate (a full disk, a failing device): one line per kind per 10 s. */
    private static final RateLimitedLog FAILURES = RateLimitedLog.tenSeconds(LOGGER);
    private static final long CLOSE_WAIT_SECONDS = 10;

    /** One worker's aligned buffers: a header block and a padded max-size payload. */
    private record IoBuffers(MemorySegment header, MemorySegment payload) {}

    /** Worker body that may fail with an I/O error. */
    private interface IoTask<T> {
        T run() throws IOException;
    }

    private final SsdConfig config;
    private final ExtentDevice device;
    private final ExtentIndex index;
    private final SsdMetrics metrics;
    private final SsdStore store;
    private final ThreadPoolExecutor workers;
    private final ArrayBlockingQueue<IoBuffers> buffers;

    ExtentWorkers(SsdConfig config, Arena arena, ExtentDevice device, ExtentIndex index, SsdMetrics metrics,
                  SsdStore store) {
        this.config = config;
        this.device = device;
        this.index = index;
        this.metrics = metrics;
        this.store = store;
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
    }

    /** Queues a write of {@code key}'s payload as a new extent placed by {@code ring}; see {@link SsdStore#write}. */
    CompletableFuture<WriteResult> write(ExtentRing ring, NamespaceDigest namespace, StateKey key, MemorySegment payload,
                                         int payloadBytes) {
        return submit(() -> doWrite(ring, namespace, key, payload, payloadBytes), WriteResult.Busy::new,
                WriteResult.Failed::new);
    }

    /** Queues a positional, verified read of the pinned extent; see {@link SsdStore#read}. */
    CompletableFuture<ReadResult> read(Pin pin, MemorySegment destination, long enqueuedNanos,
                                       SsdReadObservations observations) {
        return submit(() -> doRead(pin, destination, enqueuedNanos, observations), ReadResult.Busy::new,
                ReadResult.Failed::new);
    }

    /** Tasks waiting for a worker. */
    int queued() {
        return workers.getQueue().size();
    }

    /** Stops accepting tasks and waits for the queued ones (at most {@value #CLOSE_WAIT_SECONDS} s). */
    void close() {
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
                    for (Extent c : claimed) index.remove(c);
                    yield writePlaced(placed, payload);
                } finally {
                    store.releasePin(placed); // the writer's in-flight pin
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
        index.publish(placed);
        metrics.write(placed.footprintBytes());
        return new WriteResult.Committed(placed.key, placed.generation);
    }

    private ReadResult doRead(Pin pin, MemorySegment destination, long enqueuedNanos, SsdReadObservations observations)
            throws IOException {
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
            if (damage.isPresent()) return result = store.corrupt(e, damage.get());
            damage = ExtentVerifier.payload(target, got.payloadBytes(), e);
            if (damage.isPresent()) return result = store.corrupt(e, damage.get());
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

    private static boolean isDirectCapable(MemorySegment segment, long paddedBytes) {
        return segment.isNative() && segment.address() % ExtentLayout.BLOCK_BYTES == 0
                && segment.byteSize() >= paddedBytes;
    }

    private IoBuffers takeBuffers() {
        IoBuffers b = buffers.poll();
        if (b == null) throw new IllegalStateException("more concurrent I/O tasks than worker buffers");
        return b;
    }

    private <T> CompletableFuture<T> submit(IoTask<T> task, Supplier<T> busy, Function<String, T> failed) {
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
