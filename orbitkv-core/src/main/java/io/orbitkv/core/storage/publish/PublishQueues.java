package io.orbitkv.core.storage.publish;

import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.LongSupplier;

/**
 * The {@link PublishPipeline}'s bounded state behind its one lock: the seal queue (bytes and
 * entries), the eviction hand-over queue ({@code writeQueueBytes} of images) and the
 * write-through queue ({@code writeLaneOps} images), the {@link WriteBudget}, the count of admitted writes and the closed and
 * draining flags.
 *
 * <p>Thread model: every method may be called from any thread; each takes {@code queueLock}
 * briefly and calls nothing outside this class and its budget, so the lock is never held while
 * the pipeline calls DRAM, the SSD store or the dispatcher. {@link #awaitWork} and
 * {@link #awaitWriteRoom} wait on the lock's conditions ({@code work}: a block to seal or an image
 * to admit; {@code writeRoom}: an admitted write finished).
 *
 * <p>Invariants: {@code queuedBytes} is the sum of the seal queue's lengths and at most
 * {@code sealQueueBytes}; the hand-over queue holds at most {@code writeQueueBytes} of images and
 * the write-through queue at most {@code writeLaneOps} entries; a hand-over or write-through
 * entry is admitted only while fewer than {@code writeLaneOps} writes are admitted, so the
 * dispatcher's write lane never displaces one of them; after {@link #close} nothing is queued and every
 * offer is refused.
 *
 * <p>Design note: one lock for all of it, because the sealer's wait depends on all three queues
 * (under {@code write-through} a full write-through queue stops sealing) and one condition must
 * see every change; the lock is held only for a deque operation or a token-bucket refill (no
 * copy, no I/O, no call out), so a publisher never waits behind the sealer's 2 MiB copies.
 */
final class PublishQueues {

    /** One block waiting to be sealed; {@code enqueuedNanos} is {@link System#nanoTime()} at publish when cost observations are on, else 0. */
    record SealRequest(StateKey key, int namespaceId, PageSource source, long enqueuedNanos) {}

    /** An image DRAM evicted and handed over, waiting for SSD admission under {@code on-evict}. */
    record Evicted(Lease retained, int namespaceId) {}

    /** A write-through image waiting for write room; its lease keeps it from vanishing meanwhile. */
    record WriteThroughEntry(Lease lease, NamespaceDigest digest) {}

    /** What {@link #nextEvicted} found at the head of the hand-over queue. */
    sealed interface EvictedTurn {
        /** Nothing to admit now: the queue is empty, the lane is full, or the budget said wait. */
        record Wait() implements EvictedTurn {}

        /** Taken off the queue and admitted (lane slot and budget bytes taken). */
        record Admitted(Evicted evicted) implements EvictedTurn {}

        /** Taken off the queue: larger than the queued-bytes bound, so it can never be admitted. */
        record TooLarge(Evicted evicted) implements EvictedTurn {}
    }

    /** What {@link #nextWriteThrough} found at the head of the write-through queue. */
    sealed interface WriteThroughTurn {
        /** Nothing to admit now: the queue is empty, the lane is full, or the budget said wait. */
        record Wait() implements WriteThroughTurn {}

        /** Taken off the queue and admitted (lane slot and budget bytes taken). */
        record Admitted(WriteThroughEntry entry) implements WriteThroughTurn {}

        /** Taken off the queue: larger than the queued-bytes bound, so it can never be admitted. */
        record TooLarge(WriteThroughEntry entry) implements WriteThroughTurn {}
    }

    /** Outcome of {@link #offerWriteThrough}. */
    enum Offer { QUEUED, FULL, CLOSED }

    /** What {@link #close} took off the queues, for the caller to drop and count. */
    record Closed(List<SealRequest> sealRequests, List<Evicted> evicted) {}

    /** How often the sealer retries write-through entries held back by the write rate. */
    static final long WRITE_THROUGH_RETRY_NANOS = TimeUnit.MILLISECONDS.toNanos(1);

    private final PublishConfig config;
    private final LongSupplier nanoClock;
    private final ReentrantLock queueLock = new ReentrantLock();
    private final Condition work = queueLock.newCondition();
    /** Signalled when an admitted write finishes (lane room and queued bytes returned). */
    private final Condition writeRoom = queueLock.newCondition();
    // @GuardedBy("queueLock")
    private final ArrayDeque<SealRequest> sealQueue = new ArrayDeque<>();
    // @GuardedBy("queueLock")
    private long queuedBytes;
    // @GuardedBy("queueLock"); at most writeQueueBytes of images (each entry pins an evicted DRAM slot)
    private final ArrayDeque<Evicted> evictedQueue = new ArrayDeque<>();
    // @GuardedBy("queueLock"): the bytes of evictedQueue's images
    private long evictedBytes;
    // @GuardedBy("queueLock"); at most writeLaneOps entries, each holding a DRAM lease
    private final ArrayDeque<WriteThroughEntry> writeThroughQueue = new ArrayDeque<>();
    // @GuardedBy("queueLock")
    private final WriteBudget budget;
    /** Writes admitted and not finished (in the dispatcher's lane or in the store). */
    // @GuardedBy("queueLock")
    private int admittedWrites;
    /** Set when the pipeline closes: write-through entries are admitted ignoring the rate, within the drain bound. */
    // @GuardedBy("queueLock")
    private boolean draining;
    // @GuardedBy("queueLock")
    private boolean closed;

    /** @param nanoClock the budget's clock ({@code System::nanoTime} in production; tests drive it) */
    PublishQueues(PublishConfig config, LongSupplier nanoClock) {
        this.config = config;
        this.nanoClock = nanoClock;
        this.budget = new WriteBudget(config.writeBytesPerSecond(), config.writeBurstBytes(),
                config.writeQueueBytes(), nanoClock.getAsLong());
    }

    // ---- seal queue ------------------------------------------------------------------------

    /** Queues a block to seal unless closed or over the byte or entry bound. */
    PublishResult offerSeal(SealRequest request) {
        int length = request.source().lengthBytes();
        queueLock.lock();
        try {
            if (closed || queuedBytes + length > config.sealQueueBytes()
                    || sealQueue.size() >= config.sealQueueEntries()) {
                return new PublishResult.Busy();
            }
            sealQueue.addLast(request);
            queuedBytes += length;
            work.signal();
            return new PublishResult.Queued(queuedBytes);
        } finally {
            queueLock.unlock();
        }
    }

    /** The oldest block to seal; empty when none, or while the write-through queue is full. */
    Optional<SealRequest> pollSeal() {
        queueLock.lock();
        try {
            if (writeThroughFull()) return Optional.empty();
            SealRequest next = sealQueue.pollFirst();
            if (next == null) return Optional.empty();
            queuedBytes -= next.source().lengthBytes();
            return Optional.of(next);
        } finally {
            queueLock.unlock();
        }
    }

    /**
     * Waits up to {@code timeoutNanos} for a block to seal or an evicted image to admit; true when
     * there is work. While write-through entries wait, returns after at most
     * {@link #WRITE_THROUGH_RETRY_NANOS}: the write rate frees room by the clock, not by a signal.
     */
    boolean awaitWork(long timeoutNanos) throws InterruptedException {
        queueLock.lock();
        try {
            long remaining = timeoutNanos;
            while (!hasWork() && !closed) {
                if (remaining <= 0) return false;
                if (!writeThroughQueue.isEmpty() || !evictedQueue.isEmpty()) {
                    work.awaitNanos(Math.min(remaining, WRITE_THROUGH_RETRY_NANOS));
                    return true;
                }
                remaining = work.awaitNanos(remaining);
            }
            return hasWork();
        } finally {
            queueLock.unlock();
        }
    }

    // @GuardedBy("queueLock")
    private boolean hasWork() {
        return (!sealQueue.isEmpty() && !writeThroughFull())
                || (!evictedQueue.isEmpty() && admittedWrites < config.writeLaneOps()
                && budget.mayAdmitNow(evictedQueue.peekFirst().retained().lengthBytes(), nanoClock.getAsLong()));
    }

    // @GuardedBy("queueLock")
    private boolean writeThroughFull() {
        return config.policy() instanceof SsdAdmissionPolicy.WriteThrough
                && writeThroughQueue.size() >= config.writeLaneOps();
    }

    // ---- eviction hand-over ----------------------------------------------------------------

    /**
     * Queues an image DRAM handed over on eviction; false when closed or when its bytes would take
     * the queue past {@code writeQueueBytes} (the bytes the write budget may have waiting).
     */
    boolean offerEvicted(Evicted evicted) {
        int length = evicted.retained().lengthBytes();
        queueLock.lock();
        try {
            boolean queued = !closed && evictedBytes + length <= config.writeQueueBytes() && evictedQueue.add(evicted);
            if (queued) {
                evictedBytes += length;
                work.signal();
            }
            return queued;
        } finally {
            queueLock.unlock();
        }
    }

    /**
     * Takes the oldest handed-over image if the write lane has room ({@code writeLaneOps} admitted
     * writes) and the budget admits it, or if it can never fit the queued-bytes bound. An image the
     * lane or the rate cannot take yet stays queued (its DRAM slot stays parked): hand-overs wait
     * for the SSD rather than displace each other.
     */
    EvictedTurn nextEvicted() {
        queueLock.lock();
        try {
            Evicted next = evictedQueue.peekFirst();
            if (next == null || admittedWrites >= config.writeLaneOps()) return new EvictedTurn.Wait();
            int length = next.retained().lengthBytes();
            if (length > budget.maxQueuedBytes()) {
                takeEvicted();
                return new EvictedTurn.TooLarge(next);
            }
            if (budget.tryAdmit(length, nanoClock.getAsLong()) != WriteBudget.Admission.ADMITTED) {
                return new EvictedTurn.Wait();
            }
            admittedWrites++;
            takeEvicted();
            return new EvictedTurn.Admitted(next);
        } finally {
            queueLock.unlock();
        }
    }

    // @GuardedBy("queueLock")
    private void takeEvicted() {
        evictedBytes -= evictedQueue.pollFirst().retained().lengthBytes();
    }

    /** Bytes of handed-over images waiting for SSD admission. */
    long evictedQueueBytes() {
        queueLock.lock();
        try {
            return evictedBytes;
        } finally {
            queueLock.unlock();
        }
    }

    // ---- write-through queue and the budget ------------------------------------------------

    /** Queues a leased write-through image unless closed or full ({@code writeLaneOps}). */
    Offer offerWriteThrough(WriteThroughEntry entry) {
        queueLock.lock();
        try {
            if (closed) return Offer.CLOSED;
            if (writeThroughQueue.size() >= config.writeLaneOps()) return Offer.FULL;
            writeThroughQueue.addLast(entry);
            work.signal();
            return Offer.QUEUED;
        } finally {
            queueLock.unlock();
        }
    }

    /**
     * Takes the oldest write-through entry if the write lane has room ({@code writeLaneOps}
     * admitted writes) and the budget admits it (ignoring the rate while draining), or if it can
     * never fit the queued-bytes bound.
     */
    WriteThroughTurn nextWriteThrough() {
        queueLock.lock();
        try {
            WriteThroughEntry next = writeThroughQueue.peekFirst();
            if (next == null || admittedWrites >= config.writeLaneOps()) return new WriteThroughTurn.Wait();
            int length = next.lease().lengthBytes();
            if (length > budget.maxQueuedBytes()) {
                writeThroughQueue.pollFirst();
                return new WriteThroughTurn.TooLarge(next);
            }
            WriteBudget.Admission a = draining ? budget.tryAdmitIgnoringRate(length)
                    : budget.tryAdmit(length, nanoClock.getAsLong());
            if (a != WriteBudget.Admission.ADMITTED) return new WriteThroughTurn.Wait();
            admittedWrites++;
            writeThroughQueue.pollFirst();
            return new WriteThroughTurn.Admitted(next);
        } finally {
            queueLock.unlock();
        }
    }

    /** Asks the budget for a write of {@code lengthBytes}; an admitted write takes a lane slot. */
    WriteBudget.Admission tryAdmit(int lengthBytes) {
        queueLock.lock();
        try {
            WriteBudget.Admission admission = budget.tryAdmit(lengthBytes, nanoClock.getAsLong());
            if (admission == WriteBudget.Admission.ADMITTED) admittedWrites++;
            return admission;
        } finally {
            queueLock.unlock();
        }
    }

    /** An admitted write of {@code lengthBytes} finished (any outcome): its bytes and lane slot return. */
    void onWriteFinished(int lengthBytes) {
        queueLock.lock();
        try {
            budget.onDequeued(lengthBytes);
            admittedWrites--;
            writeRoom.signalAll();
            if (!evictedQueue.isEmpty()) work.signal();
        } finally {
            queueLock.unlock();
        }
    }

    // ---- closing ---------------------------------------------------------------------------

    /** From now on write-through entries are admitted ignoring the rate (the queue bound still holds). */
    void startDraining() {
        queueLock.lock();
        try {
            draining = true;
        } finally {
            queueLock.unlock();
        }
    }

    /**
     * Waits (at most until {@code deadlineNanos}, on {@link System#nanoTime()}) for write room while
     * write-through entries are queued; false when the queue is empty, the deadline passed or the
     * thread was interrupted (the interrupt is kept): then call {@link #closeWriteThrough}.
     */
    boolean awaitWriteRoom(long deadlineNanos) {
        queueLock.lock();
        try {
            long remaining = deadlineNanos - System.nanoTime();
            if (writeThroughQueue.isEmpty() || remaining <= 0) return false;
            writeRoom.awaitNanos(Math.min(remaining, WRITE_THROUGH_RETRY_NANOS * 10));
            return true;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        } finally {
            queueLock.unlock();
        }
    }

    /** Closes the queues to new entries and takes the write-through entries still waiting. */
    List<WriteThroughEntry> closeWriteThrough() {
        queueLock.lock();
        try {
            closed = true; // no entry is queued after this
            List<WriteThroughEntry> left = new ArrayList<>(writeThroughQueue);
            writeThroughQueue.clear();
            return left;
        } finally {
            queueLock.unlock();
        }
    }

    /** Closes the queues and takes the blocks not sealed and the handed-over images not admitted. */
    Closed close() {
        queueLock.lock();
        try {
            closed = true;
            Closed taken = new Closed(List.copyOf(sealQueue), List.copyOf(evictedQueue));
            sealQueue.clear();
            queuedBytes = 0;
            evictedQueue.clear();
            evictedBytes = 0;
            work.signalAll();
            return taken;
        } finally {
            queueLock.unlock();
        }
    }

    // ---- gauges ----------------------------------------------------------------------------

    long sealQueueBytes() {
        return locked(() -> queuedBytes);
    }

    int sealQueueDepth() {
        return (int) locked(sealQueue::size);
    }

    int writeThroughQueueDepth() {
        return (int) locked(writeThroughQueue::size);
    }

    long writeQueuedBytes() {
        return locked(budget::queuedBytes);
    }

    private long locked(LongSupplier read) {
        queueLock.lock();
        try {
            return read.getAsLong();
        } finally {
            queueLock.unlock();
        }
    }
}
