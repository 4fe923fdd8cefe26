package io.orbitkv.core.storage.publish;

import java.util.ArrayDeque;
import java.util.Optional;

/**
 * Orders SSD work: restore reads before publish writes, with bounded write starvation.
 *
 * <p>Owns two bounded FIFO lanes. Not thread-safe: the owner (the pipeline's dispatcher) calls
 * it under its own lock. Invariant: while a write waits, at most {@code maxReadsWhileWriteWaits}
 * reads are handed out before the oldest write is (the seed: "restore traffic needs priority
 * with bounded write starvation").
 *
 * <p>Design note: strict priority would let a steady restore stream starve SSD admission
 * forever (the cache never warms); round-robin would add a whole 2 MiB write (~1 ms on NVMe) to
 * every other restore. A starvation counter keeps reads first in the common case and gives a
 * write a turn after K reads, so a write's wait is bounded by K read service times.
 */
public final class IoScheduler<R, W> {

    /** One unit of work handed to a worker. */
    public sealed interface Work<R, W> {
        record Read<R, W>(R task) implements Work<R, W> {}
        record Write<R, W>(W task) implements Work<R, W> {}
    }

    private final ArrayDeque<R> reads = new ArrayDeque<>();
    private final ArrayDeque<W> writes = new ArrayDeque<>();
    private final int maxQueuedReads;
    private final int maxQueuedWrites;
    private final int maxReadsWhileWriteWaits;
    private int readsSinceWriteWaiting;

    public IoScheduler(int maxQueuedReads, int maxQueuedWrites, int maxReadsWhileWriteWaits) {
        if (maxQueuedReads <= 0 || maxQueuedWrites <= 0 || maxReadsWhileWriteWaits <= 0) {
            throw new IllegalArgumentException("scheduler bounds must be positive");
        }
        this.maxQueuedReads = maxQueuedReads;
        this.maxQueuedWrites = maxQueuedWrites;
        this.maxReadsWhileWriteWaits = maxReadsWhileWriteWaits;
    }

    /** Queues a read; false when the read lane is full (the caller answers BUSY). */
    public boolean offerRead(R read) {
        if (reads.size() >= maxQueuedReads) return false;
        reads.addLast(read);
        return true;
    }

    /** Queues a write; false when the write lane is full (the caller drops the write, counted). */
    public boolean offerWrite(W write) {
        if (writes.size() >= maxQueuedWrites) return false;
        if (writes.isEmpty()) readsSinceWriteWaiting = 0;
        writes.addLast(write);
        return true;
    }

    /** The next unit of work, or empty when both lanes are empty. */
    public Optional<Work<R, W>> poll() {
        boolean writeDue = !writes.isEmpty() && readsSinceWriteWaiting >= maxReadsWhileWriteWaits;
        if (!reads.isEmpty() && !writeDue) {
            if (!writes.isEmpty()) readsSinceWriteWaiting++;
            return Optional.of(new Work.Read<>(reads.pollFirst()));
        }
        if (!writes.isEmpty()) {
            readsSinceWriteWaiting = 0;
            return Optional.of(new Work.Write<>(writes.pollFirst()));
        }
        return Optional.empty();
    }

    /** Removes and returns the oldest queued write (to make room under pressure), or empty. */
    public Optional<W> pollOldestWrite() {
        return Optional.ofNullable(writes.pollFirst());
    }

    /** Removes queued writes that match (e.g. sources dropped under pressure); returns how many. */
    public int removeWritesIf(java.util.function.Predicate<W> drop) {
        int before = writes.size();
        writes.removeIf(drop);
        return before - writes.size();
    }

    public int queuedReads() {
        return reads.size();
    }

    public int queuedWrites() {
        return writes.size();
    }
}
