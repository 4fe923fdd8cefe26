package io.orbitkv.core.storage.ssd;

import io.orbitkv.core.storage.ssd.uring.Libc;
import io.orbitkv.core.storage.ssd.uring.UringLayout;
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
 * payload with one scatter read ({@code IORING_OP_READV}: header into a route buffer, payload
 * into the destination) on a {@link UringReader}, and verifies them with the same
 * {@link ExtentVerifier} checks as the positional route before anything is served.
 *
 * <p>Owns read-only file descriptors of the ring files (O_DIRECT when the store is), a pool of
 * {@code uringInflightReads} read slots (a 4 KiB header buffer and its two-entry iovec array),
 * a pool of {@code ioThreads} bounce buffers
 * (padded max payload) for destinations that are not 4 KiB aligned, and the reader.
 *
 * <p>Thread model: {@link #read} is thread-safe and never blocks; completions run on the
 * reader's completion owner thread, which verifies, copies out of a bounce buffer if one was
 * used, returns the buffers, drops the route's extent pin, records the cost observation and
 * completes the caller's future, in that order.
 *
 * <p>Invariants: every submitted read holds one read slot, at most one bounce buffer and
 * one extra pin on its {@link Extent} from submission until its completion has run, whatever
 * happens to the caller's future or {@link Pin} meanwhile (cancellation cannot free memory
 * the kernel is writing, and the ring writer cannot reuse the extent's bytes under it). A
 * direct destination belongs to the kernel for the same interval: the caller must keep it
 * valid until the returned future completes, also after cancelling it.
 *
 * <p>Design note: one scatter read of the whole footprint rather than two reads (header, then
 * payload) or one read into a scratch buffer: the device sees a single I/O of exactly the
 * bytes fio reads for an extent, and an aligned DRAM slot still receives the payload straight
 * from the device (no 2 MiB copy, ~0.2 ms at 10 GB/s). Against fio's io_uring engine on the
 * same file the route measured a median 1.11 / 1.04 of fio's rate at 2 MiB (depth 1 / 16)
 * and 0.85 / 0.90 at 256 KiB on a loaded 2-vCPU host (docs/operations.md has every run).
 */
final class UringReadRoute implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(UringReadRoute.class.getName());

    /** Outcome of {@link #open}. */
    sealed interface Open {
        record Opened(UringReadRoute route) implements Open {}

        record Unavailable(String reason) implements Open {}
    }

    /** One read's kernel-owned memory besides the payload target: the header block and the iovec pair. */
    private record ReadSlot(MemorySegment header, MemorySegment iovecs) {}

    private final SsdStore store;
    private final SsdConfig config;
    private final SsdMetrics metrics;
    private final SsdReadObservations observations;
    private final UringReader reader;
    private final int[] fds;
    private final Arena arena;
    private final ArrayBlockingQueue<ReadSlot> slots;
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
        this.slots = new ArrayBlockingQueue<>(config.uringInflightReads());
        for (int i = 0; i < config.uringInflightReads(); i++) {
            slots.add(new ReadSlot(arena.allocate(ExtentLayout.HEADER_BYTES, ExtentLayout.BLOCK_BYTES),
                    arena.allocate(UringLayout.IOVEC.byteSize() * 2, 8)));
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
        ReadSlot slot = slots.poll();
        if (slot == null) return busy(e, null, null);
        long padded = ExtentLayout.paddedPayloadBytes(e.payloadBytes);
        boolean direct = destination.isNative() && destination.address() % ExtentLayout.BLOCK_BYTES == 0
                && destination.byteSize() >= padded;
        MemorySegment bounce = direct ? null : bounces.poll();
        if (!direct && bounce == null) return busy(e, slot, null);
        MemorySegment target = direct ? destination.asSlice(0, padded) : bounce.asSlice(0, padded);
        UringReader.ScatterRead.describe(slot.iovecs(), 0, slot.header());
        UringReader.ScatterRead.describe(slot.iovecs(), 1, target);
        CompletableFuture<ReadResult> result = new CompletableFuture<>();
        UringReader.Submit s = reader.submit(List.of(new UringReader.ScatterRead(fds[e.file], e.offset, slot.iovecs(), 2)),
                (results, submitted, completed) ->
                        onComplete(e, destination, slot, bounce, target, results[0], result, enqueuedNanos, submitted,
                                completed));
        return switch (s) {
            case UringReader.Submit.Submitted() -> result;
            case UringReader.Submit.Busy() -> busy(e, slot, bounce);
            case UringReader.Submit.Closed() -> {
                giveBack(e, slot, bounce);
                throw new IllegalStateException("store closed: " + config.directory());
            }
        };
    }

    private CompletableFuture<ReadResult> busy(Extent e, ReadSlot slot, MemorySegment bounce) {
        giveBack(e, slot, bounce);
        metrics.error(SsdMetrics.ErrorKind.BUSY);
        return CompletableFuture.completedFuture(new ReadResult.Busy());
    }

    private void giveBack(Extent e, ReadSlot slot, MemorySegment bounce) {
        if (slot != null) slots.add(slot);
        if (bounce != null) bounces.add(bounce);
        store.releasePin(e);
    }

    /** Runs on the completion owner once the scatter read's CQE is in ({@code bytesRead} or -errno). */
    private void onComplete(Extent e, MemorySegment destination, ReadSlot slot, MemorySegment bounce,
                            MemorySegment target, int bytesRead, CompletableFuture<ReadResult> future,
                            long enqueuedNanos, long submittedNanos, long completedNanos) {
        ReadResult r;
        try {
            r = verify(e, destination, slot.header(), bounce, target, bytesRead, future.isDone());
        } catch (RuntimeException ex) {
            LOG.log(System.Logger.Level.ERROR, "io_uring read completion failed (bug)", ex);
            r = new ReadResult.Failed(ex.toString());
        } finally {
            giveBack(e, slot, bounce);
        }
        if (observations.enabled()) {
            observations.executed(ReadPath.URING, e, r, future.isCancelled(), enqueuedNanos, submittedNanos,
                    completedNanos);
        }
        future.complete(r);
    }

    private ReadResult verify(Extent e, MemorySegment destination, MemorySegment header, MemorySegment bounce,
                              MemorySegment target, int bytesRead, boolean callerGone) {
        if (bytesRead < 0) {
            metrics.error(SsdMetrics.ErrorKind.IO);
            LOG.log(System.Logger.Level.WARNING, "io_uring read of {0} failed: errno {1}", e, -bytesRead);
            return new ReadResult.Failed("io_uring read failed: errno " + (-bytesRead));
        }
        long headerRead = Math.min(bytesRead, ExtentLayout.HEADER_BYTES);
        long payloadRead = Math.max(0, bytesRead - ExtentLayout.HEADER_BYTES);
        Optional<ExtentDamage> damage = ExtentVerifier.header(header, headerRead, e, config.maxPayloadBytes());
        if (damage.isEmpty()) damage = ExtentVerifier.payload(target, payloadRead, e);
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
