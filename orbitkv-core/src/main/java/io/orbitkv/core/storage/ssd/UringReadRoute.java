package io.orbitkv.core.storage.ssd;

import io.orbitkv.core.storage.ssd.uring.Libc;
import io.orbitkv.core.storage.ssd.uring.UringReader;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.function.IntFunction;

/**
 * The io_uring read route of one {@link SsdStore}: reads a pinned extent's header block and
 * payload as one batch of two reads on a {@link UringReader}, and verifies them with the same
 * {@link ExtentVerifier} checks as the positional route before anything is served.
 *
 * <p>Owns read-only file descriptors of the ring files (O_DIRECT when the store is), a pool of
 * {@code uringInflightReads} 4 KiB header buffers, a pool of {@code ioThreads} bounce buffers
 * (padded max payload) for destinations that are not 4 KiB aligned, and the reader.
 *
 * <p>Thread model: {@link #read} is thread-safe and never blocks; completions run on the
 * reader's completion owner thread, which verifies, copies out of a bounce buffer if one was
 * used, returns the buffers, drops the route's extent pin, records the cost observation and
 * completes the caller's future, in that order.
 *
 * <p>Invariants: every submitted read holds one header buffer, at most one bounce buffer and
 * one extra pin on its {@link Extent} from submission until its completion has run, whatever
 * happens to the caller's future or {@link Pin} meanwhile (cancellation cannot free memory
 * the kernel is writing, and the ring writer cannot reuse the extent's bytes under it). A
 * direct destination belongs to the kernel for the same interval: the caller must keep it
 * valid until the returned future completes, also after cancelling it.
 *
 * <p>Design note: header and payload go as two SQEs in one {@code io_uring_enter} rather than
 * one 4 KiB + padded read into a scratch buffer, so an aligned DRAM slot receives the payload
 * straight from the device (no 2 MiB copy, ~0.2 ms at 10 GB/s) exactly as on the positional
 * route.
 */
final class UringReadRoute implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(UringReadRoute.class.getName());

    /** Outcome of {@link #open}. */
    sealed interface Open {
        record Opened(UringReadRoute route) implements Open {}

        record Unavailable(String reason) implements Open {}
    }

    private final SsdStore store;
    private final SsdConfig config;
    private final SsdMetrics metrics;
    private final SsdReadObservations observations;
    private final UringReader reader;
    private final int[] fds;
    private final Arena arena;
    private final ArrayBlockingQueue<MemorySegment> headers;
    private final ArrayBlockingQueue<MemorySegment> bounces;

    private UringReadRoute(SsdStore store, SsdConfig config, SsdMetrics metrics, SsdReadObservations observations,
                           UringReader reader, int[] fds) {
        this.store = store;
        this.config = config;
        this.metrics = metrics;
        this.observations = observations;
        this.reader = reader;
        this.fds = fds;
        this.arena = Arena.ofShared();
        this.headers = new ArrayBlockingQueue<>(config.uringInflightReads());
        for (int i = 0; i < config.uringInflightReads(); i++) {
            headers.add(arena.allocate(ExtentLayout.HEADER_BYTES, ExtentLayout.BLOCK_BYTES));
        }
        long paddedMax = ExtentLayout.paddedPayloadBytes(config.maxPayloadBytes());
        this.bounces = new ArrayBlockingQueue<>(config.ioThreads());
        for (int i = 0; i < config.ioThreads(); i++) bounces.add(arena.allocate(paddedMax, ExtentLayout.BLOCK_BYTES));
    }

    /**
     * Opens the route: the reader (through {@code opener}, the capability probe tests override)
     * and a read-only descriptor per ring file. Unavailable, with the reason, when either fails.
     */
    static Open open(SsdStore store, SsdConfig config, ExtentFiles files, SsdMetrics metrics,
                     SsdReadObservations observations, IntFunction<UringReader.Open> opener) {
        UringReader reader;
        switch (opener.apply(config.uringInflightReads())) {
            case UringReader.Open.Opened(UringReader r) -> reader = r;
            case UringReader.Open.Unavailable(String reason) -> {
                return new Open.Unavailable(reason);
            }
        }
        int[] fds = new int[files.fileCount()];
        for (int i = 0; i < fds.length; i++) {
            String path = files.directory().resolve(ExtentFiles.fileName(i)).toString();
            int fd = Libc.openReadOnly(path, files.mode() == IoMode.DIRECT);
            if (fd < 0) {
                for (int j = 0; j < i; j++) Libc.close(fds[j]);
                reader.close();
                return new Open.Unavailable("open(" + path + ") for io_uring failed: errno " + (-fd));
            }
            fds[i] = fd;
        }
        return new Open.Opened(new UringReadRoute(store, config, metrics, observations, reader, fds));
    }

    /** Submits a verified read of the pinned extent; see {@link SsdStore#read} for the contract. */
    CompletableFuture<ReadResult> read(Pin pin, MemorySegment destination, long enqueuedNanos) {
        if (pin.isReleased()) return CompletableFuture.completedFuture(new ReadResult.Released());
        Extent e = pin.extent();
        if (!e.tryPin()) return CompletableFuture.completedFuture(new ReadResult.Released());
        MemorySegment header = headers.poll();
        if (header == null) return busy(e, null, null);
        long padded = ExtentLayout.paddedPayloadBytes(e.payloadBytes);
        boolean direct = destination.isNative() && destination.address() % ExtentLayout.BLOCK_BYTES == 0
                && destination.byteSize() >= padded;
        MemorySegment bounce = direct ? null : bounces.poll();
        if (!direct && bounce == null) return busy(e, header, null);
        MemorySegment target = direct ? destination.asSlice(0, padded) : bounce.asSlice(0, padded);
        CompletableFuture<ReadResult> result = new CompletableFuture<>();
        List<UringReader.Read> reads = List.of(
                new UringReader.Read(fds[e.file], e.offset, header),
                new UringReader.Read(fds[e.file], e.offset + ExtentLayout.HEADER_BYTES, target));
        UringReader.Submit s = reader.submit(reads, (results, submitted, completed) ->
                onComplete(e, destination, header, bounce, target, results, result, enqueuedNanos, submitted, completed));
        return switch (s) {
            case UringReader.Submit.Submitted() -> result;
            case UringReader.Submit.Busy() -> busy(e, header, bounce);
            case UringReader.Submit.Closed() -> {
                giveBack(e, header, bounce);
                throw new IllegalStateException("store closed: " + config.directory());
            }
        };
    }

    private CompletableFuture<ReadResult> busy(Extent e, MemorySegment header, MemorySegment bounce) {
        giveBack(e, header, bounce);
        metrics.error(SsdMetrics.ErrorKind.BUSY);
        return CompletableFuture.completedFuture(new ReadResult.Busy());
    }

    private void giveBack(Extent e, MemorySegment header, MemorySegment bounce) {
        if (header != null) headers.add(header);
        if (bounce != null) bounces.add(bounce);
        store.releasePin(e);
    }

    /** Runs on the completion owner once both CQEs are in. */
    private void onComplete(Extent e, MemorySegment destination, MemorySegment header, MemorySegment bounce,
                            MemorySegment target, int[] results, CompletableFuture<ReadResult> future,
                            long enqueuedNanos, long submittedNanos, long completedNanos) {
        ReadResult r;
        try {
            r = verify(e, destination, header, bounce, target, results, future.isDone());
        } catch (RuntimeException ex) {
            LOG.log(System.Logger.Level.ERROR, "io_uring read completion failed (bug)", ex);
            r = new ReadResult.Failed(ex.toString());
        } finally {
            giveBack(e, header, bounce);
        }
        if (observations.enabled()) {
            observations.executed(ReadPath.URING, e, r, future.isCancelled(), enqueuedNanos, submittedNanos,
                    completedNanos);
        }
        future.complete(r);
    }

    private ReadResult verify(Extent e, MemorySegment destination, MemorySegment header, MemorySegment bounce,
                              MemorySegment target, int[] results, boolean callerGone) {
        if (results[0] < 0 || results[1] < 0) {
            metrics.error(SsdMetrics.ErrorKind.IO);
            int errno = -Math.min(results[0], results[1]);
            LOG.log(System.Logger.Level.WARNING, "io_uring read of {0} failed: errno {1}", e, errno);
            return new ReadResult.Failed("io_uring read failed: errno " + errno);
        }
        Optional<ExtentDamage> damage = ExtentVerifier.header(header, results[0], e, config.maxPayloadBytes());
        if (damage.isEmpty()) damage = ExtentVerifier.payload(target, results[1], e);
        if (damage.isPresent()) return store.corrupt(e, damage.get());
        if (bounce != null && !callerGone) {
            MemorySegment.copy(target, 0, destination, 0, e.payloadBytes);
            metrics.bounceCopy();
        }
        metrics.read(e.payloadBytes);
        return new ReadResult.Served(e.payloadBytes, bounce != null);
    }

    /** Reads in flight now. */
    int inflight() {
        return reader.inflight();
    }

    /** Stops the reader (waiting, bounded, for in-flight reads), then closes descriptors and buffers. */
    @Override
    public void close() {
        reader.close();
        for (int fd : fds) Libc.close(fd);
        if (reader.inflight() == 0) {
            arena.close();
        } else {
            LOG.log(System.Logger.Level.WARNING, "io_uring route {0}: reads still in flight; buffers left to the kernel",
                    config.directory());
        }
    }

    static IOException unavailable(SsdConfig config, String reason) {
        return new IOException("SSD store " + config.directory() + ": read path 'uring' was forced but io_uring is unavailable ("
                + reason + "); refusing to open (use 'auto' or 'positional')");
    }
}
