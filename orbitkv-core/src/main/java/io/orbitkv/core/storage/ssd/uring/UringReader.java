package io.orbitkv.core.storage.ssd.uring;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Positional reads through one {@link IoUring}, with a bounded table of in-flight batches and a
 * completion owner: one platform thread that reaps every CQE and runs each batch's completion.
 *
 * <p>Owns the ring, the in-flight table ({@code maxInflightBatches} slots) and the reaper
 * thread. A caller submits a batch of at most {@link #MAX_READS_PER_BATCH} reads; the batch
 * occupies one slot from submission until the last of its CQEs arrives. Buffers and file
 * descriptors named by a batch belong to the kernel for that whole interval: the caller's
 * {@link Completion} is the only signal that they are free again, and nothing (a cancelled
 * caller, {@link #close}) ends the interval early.
 *
 * <p>Thread model: {@link #submit} is thread-safe (the SQ side is guarded by
 * {@code submitLock}); completions run on the reaper thread, one at a time, in CQE order. A
 * completion that submits its follow-up read (a closed-loop reader) only queues it; the reaper
 * submits everything queued during one drain in the same {@code io_uring_enter} that waits for
 * the next completion (one system call per wake-up, as fio's io_uring engine does).
 * {@link #close} stops new submissions, waits (bounded) for the in-flight batches, then unmaps.
 *
 * <p>Invariants: a slot is freed only by the reaper after all of its batch's CQEs, just before
 * the batch's completion runs; {@code inflight} counts batches whose completion has not finished
 * (occupied slots plus at most the one completion running); SQ capacity ({@code 2 × slots + 1}, rounded up by
 * the kernel) always has room for every in-flight SQE plus the close wake-up no-op, and the CQ
 * (twice the SQ) for every outstanding CQE, so neither queue can overflow.
 *
 * <p>Design note: one reaper rather than completion on the submitting threads: a caller that
 * gives up (cancellation, deadline) cannot own a completion it will never wait for, and the
 * kernel writes the buffer whether anyone waits or not. A reaper costs one blocked thread and a
 * wake-up per batch (~5 µs), against 100 µs–1 ms for a 256 KiB–2 MiB O_DIRECT read.
 */
public final class UringReader implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(UringReader.class.getName());

    /** Reads one batch may carry (an extent is a header block and a payload). */
    public static final int MAX_READS_PER_BATCH = 2;
    private static final long WAKE_USER_DATA = -1L;
    private static final long CLOSE_WAIT_SECONDS = 10;

    /** One operation of a batch. */
    public sealed interface Op permits Read, ScatterRead {}

    /** One positional read into {@code buffer} (its whole length) from {@code fd} at {@code offset}. */
    public record Read(int fd, long offset, MemorySegment buffer) implements Op {
        public Read {
            Objects.requireNonNull(buffer, "buffer");
            if (offset < 0 || buffer.byteSize() <= 0 || buffer.byteSize() > Integer.MAX_VALUE) {
                throw new IllegalArgumentException("bad read: offset=" + offset + " length=" + buffer.byteSize());
            }
        }
    }

    /**
     * One positional read of consecutive file bytes into several buffers ({@code readv}):
     * {@code iovecs} holds {@code count} {@link UringLayout#IOVEC} entries, filled by the caller
     * with {@link #describe}; it and every buffer it names must stay valid until completion.
     */
    public record ScatterRead(int fd, long offset, MemorySegment iovecs, int count) implements Op {
        public ScatterRead {
            Objects.requireNonNull(iovecs, "iovecs");
            if (offset < 0 || count <= 0 || iovecs.byteSize() < count * UringLayout.IOVEC.byteSize()) {
                throw new IllegalArgumentException("bad scatter read: offset=" + offset + " count=" + count);
            }
        }

        /** Writes iovec {@code index} of {@code iovecs} to describe {@code buffer}. */
        public static void describe(MemorySegment iovecs, int index, MemorySegment buffer) {
            long base = index * UringLayout.IOVEC.byteSize();
            iovecs.set(java.lang.foreign.ValueLayout.JAVA_LONG, base, buffer.address());
            iovecs.set(java.lang.foreign.ValueLayout.JAVA_LONG, base + 8, buffer.byteSize());
        }
    }

    /** Runs on the completion owner once every read of a batch has completed. */
    @FunctionalInterface
    public interface Completion {
        /**
         * @param results          per read, in submission order: bytes read, or -errno
         * @param submittedNanos   {@link System#nanoTime()} just before the SQEs were handed to the kernel
         * @param completedNanos   {@link System#nanoTime()} when the last CQE was reaped
         */
        void onComplete(int[] results, long submittedNanos, long completedNanos);
    }

    /** Outcome of {@link #submit}. */
    public sealed interface Submit {
        /** The batch is in flight; its completion will run exactly once. */
        record Submitted() implements Submit {}

        /** Every in-flight slot is taken; nothing was queued. */
        record Busy() implements Submit {}

        /** The reader is closing or closed; nothing was queued. */
        record Closed() implements Submit {}
    }

    /** Outcome of {@link #open}. */
    public sealed interface Open {
        record Opened(UringReader reader) implements Open {}

        record Unavailable(String reason) implements Open {}
    }

    private static final class Batch {
        final Completion completion;
        final int[] results;
        int remaining;
        long submittedNanos;

        Batch(Completion completion, int reads) {
            this.completion = completion;
            this.results = new int[reads];
            this.remaining = reads;
        }
    }

    private final IoUring ring;
    private final AtomicReferenceArray<Batch> slots;
    private final ReentrantLock submitLock = new ReentrantLock();
    /** Free slot indices, a stack; guarded by submitLock. */
    private final int[] freeSlots;
    private int freeCount;
    private final AtomicInteger inflight = new AtomicInteger();
    private final AtomicLong completedBatches = new AtomicLong();
    private final AtomicLong reaperErrors = new AtomicLong();
    private final Thread reaper;
    private volatile boolean stopping;
    /** SQEs queued by completion callbacks and not yet submitted; confined to the reaper thread. */
    private boolean deferredSubmit;

    private UringReader(IoUring ring, int maxInflightBatches, String name) {
        this.ring = ring;
        this.slots = new AtomicReferenceArray<>(maxInflightBatches);
        this.freeSlots = new int[maxInflightBatches];
        for (int i = 0; i < maxInflightBatches; i++) freeSlots[i] = maxInflightBatches - 1 - i;
        this.freeCount = maxInflightBatches;
        this.reaper = Thread.ofPlatform().daemon().name("orbitkv-uring-reaper-" + name).unstarted(this::reap);
        reaper.start();
    }

    /**
     * Sets up a ring sized for {@code maxInflightBatches} batches and starts its completion
     * owner; {@link Open.Unavailable} (with the kernel's reason) when io_uring cannot be used.
     */
    public static Open open(int maxInflightBatches, String name) {
        if (maxInflightBatches <= 0 || maxInflightBatches > (1 << 12)) {
            throw new IllegalArgumentException("maxInflightBatches must be in [1, 4096]: " + maxInflightBatches);
        }
        return switch (IoUring.setup(MAX_READS_PER_BATCH * maxInflightBatches + 1)) {
            case IoUring.Setup.Ready(IoUring ring) -> new Open.Opened(new UringReader(ring, maxInflightBatches, name));
            case IoUring.Setup.Failed(String reason) -> new Open.Unavailable(reason);
        };
    }

    /**
     * Queues the reads of one batch and hands them to the kernel. Never blocks on I/O.
     * On {@link Submit.Submitted} every buffer (and iovec array) in {@code reads} must stay
     * valid until {@code completion} has run.
     */
    public Submit submit(List<? extends Op> reads, Completion completion) {
        Objects.requireNonNull(completion, "completion");
        if (reads.isEmpty() || reads.size() > MAX_READS_PER_BATCH) {
            throw new IllegalArgumentException("a batch has 1.." + MAX_READS_PER_BATCH + " reads: " + reads.size());
        }
        Batch batch = new Batch(completion, reads.size());
        submitLock.lock();
        try {
            if (stopping) return new Submit.Closed();
            if (freeCount == 0) return new Submit.Busy();
            int slot = freeSlots[--freeCount];
            batch.submittedNanos = System.nanoTime(); // before the volatile publication, so the reaper sees it
            slots.set(slot, batch);
            inflight.incrementAndGet();
            for (int i = 0; i < reads.size(); i++) {
                boolean queued = switch (reads.get(i)) {
                    case Read r -> ring.queueRead(r.fd(), r.offset(), r.buffer(), userData(slot, i));
                    case ScatterRead v -> ring.queueReadv(v.fd(), v.offset(), v.iovecs(), v.count(), userData(slot, i));
                };
                if (!queued) {
                    throw new IllegalStateException("SQ full with " + inflight.get() + " batches in flight (sizing bug)");
                }
            }
            if (Thread.currentThread() == reaper) {
                // A completion callback issuing its next read: the reaper hands all such SQEs to
                // the kernel after it has drained the CQ, in the same io_uring_enter as its wait.
                deferredSubmit = true;
                return new Submit.Submitted();
            }
            int r = ring.submit();
            if (r < 0) {
                // The SQEs stay published; the kernel may still consume them, so the slot and
                // buffers stay owned by the batch and its completion still runs if a CQE comes.
                reaperErrors.incrementAndGet();
                LOG.log(System.Logger.Level.ERROR, "io_uring_enter(submit) failed: errno {0}", -r);
            }
            return new Submit.Submitted();
        } finally {
            submitLock.unlock();
        }
    }

    private static long userData(int slot, int read) {
        return ((long) slot << 8) | read;
    }

    /** Batches submitted and not yet completed. */
    public int inflight() {
        return inflight.get();
    }

    public int capacity() {
        return slots.length();
    }

    public long completedBatches() {
        return completedBatches.get();
    }

    /** io_uring_enter failures seen by the submitter or the reaper (EINTR excluded). */
    public long errors() {
        return reaperErrors.get();
    }

    private void reap() {
        IoUring.CompletionSink sink = this::onCqe;
        for (;;) {
            try {
                if (ring.drain(sink) > 0 && ring.hasCompletions()) {
                    // more CQEs are already waiting: send the follow-ups now (keeps the device
                    // queue full) and drain again; otherwise they go out with the wait below
                    submitDeferred(false);
                    continue;
                }
                if (stopping && inflight.get() == 0) return;
                int r = submitDeferred(true);
                if (r < 0 && r != -Libc.EINTR && r != -Libc.EAGAIN && r != -Libc.EBUSY) {
                    reaperErrors.incrementAndGet();
                    LOG.log(System.Logger.Level.WARNING, "io_uring_enter(wait) failed: errno {0}", -r);
                    Thread.sleep(1); // a persistent error must not spin a core; CQEs are still drained
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                if (inflight.get() == 0) return;
            } catch (RuntimeException | Error e) {
                reaperErrors.incrementAndGet();
                LOG.log(System.Logger.Level.ERROR, "io_uring reaper failed (bug); continuing", e);
            }
        }
    }

    /**
     * Submits the SQEs completion callbacks queued, with a wait for the next CQE when
     * {@code wait} (one system call), without one otherwise; SQEs the kernel did not take go
     * back to the pending count. Returns io_uring_enter's result. Reaper only.
     */
    private int submitDeferred(boolean wait) {
        int toSubmit = takeDeferred();
        if (toSubmit == 0 && !wait) return 0;
        int r = wait ? ring.submitAndWait(toSubmit) : ring.submitOnly(toSubmit);
        int unsubmitted = r >= 0 ? toSubmit - r : toSubmit;
        if (unsubmitted > 0) giveBackDeferred(unsubmitted);
        return r;
    }

    /** The SQEs completion callbacks queued during the last drain, to submit with the wait; reaper only. */
    private int takeDeferred() {
        if (!deferredSubmit) return 0;
        deferredSubmit = false;
        submitLock.lock();
        try {
            return ring.takePending();
        } finally {
            submitLock.unlock();
        }
    }

    /** SQEs the combined enter did not submit go back to the pending count, for the next enter. */
    private void giveBackDeferred(int n) {
        deferredSubmit = true;
        submitLock.lock();
        try {
            ring.returnPending(n);
        } finally {
            submitLock.unlock();
        }
    }

    private void onCqe(long userData, int result) {
        if (userData == WAKE_USER_DATA) return;
        int slot = (int) (userData >>> 8);
        int read = (int) (userData & 0xff);
        Batch b = slots.get(slot);
        b.results[read] = result;
        if (--b.remaining > 0) return;
        long now = System.nanoTime();
        // The slot is free before the completion runs, so a closed-loop caller can issue its
        // next batch from the completion; inflight drops only after it has run.
        slots.set(slot, null);
        submitLock.lock();
        try {
            freeSlots[freeCount++] = slot;
        } finally {
            submitLock.unlock();
        }
        try {
            b.completion.onComplete(b.results, b.submittedNanos, now);
        } catch (RuntimeException | Error e) {
            LOG.log(System.Logger.Level.ERROR, "io_uring completion callback failed (bug)", e);
        } finally {
            inflight.decrementAndGet();
            completedBatches.incrementAndGet();
        }
    }

    /**
     * Stops accepting batches and waits up to 10 s for the in-flight ones to complete. If some
     * never complete (a read stuck in the device), the ring is left mapped and open so the
     * kernel can still write their buffers; it is logged, not unmapped under the kernel's feet.
     */
    @Override
    public void close() {
        submitLock.lock();
        try {
            if (stopping) return;
            stopping = true;
            ring.queueNop(WAKE_USER_DATA);
            ring.submit();
        } finally {
            submitLock.unlock();
        }
        try {
            reaper.join(TimeUnit.SECONDS.toMillis(CLOSE_WAIT_SECONDS));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (reaper.isAlive()) {
            LOG.log(System.Logger.Level.WARNING,
                    "io_uring reader: {0} batches still in flight after {1} s; leaving the ring mapped",
                    inflight.get(), CLOSE_WAIT_SECONDS);
            return;
        }
        ring.close();
    }
}
