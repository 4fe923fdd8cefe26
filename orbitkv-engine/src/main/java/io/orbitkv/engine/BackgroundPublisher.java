package io.orbitkv.engine;

import io.orbitkv.client.OrbitKvException;
import io.orbitkv.client.PageToPublish;
import io.orbitkv.client.PublishOutcome;
import io.orbitkv.state.StateKey;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Function;
import java.util.function.Predicate;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * Publishes page images off the engine's request path: {@link #offer} copies the images into an
 * owned off-heap batch and queues it; one daemon thread hands queued batches, in order, to the
 * sink (the store's {@code OrbitKvClient.publish}: PUBLISH_RESERVE, copy, PUBLISH_COMMIT).
 *
 * <p>Owns the queue, every queued batch's {@link Arena} ({@code Arena.ofShared()}: written by the
 * offering thread, read and closed by the publisher thread or by {@link #close}) and the publisher
 * thread. Thread model: {@link #offer}, {@link #awaitPublished}, {@link #awaitKeysPublished},
 * {@link #stats} and {@link #close} may be called from any thread; the sink is called only from
 * the publisher thread; the queue and counters are guarded by {@code lock}.
 *
 * <p>Invariants: the bytes of queued batches never exceed {@code queueBytes} (a batch that does not
 * fit is dropped and counted, never queued); every batch's arena is closed exactly once, after
 * its publish, on a failed publish, or by {@link #close} (so {@link PublishStats#heldBytes} is 0 once
 * closed); batches reach the sink in the order they were offered; an exception from the sink is
 * counted and drops that batch, the thread keeps running.
 *
 * <p>Design note (drop, not wait, when full): the request path must not wait for the Manager, and a
 * page not published costs a recompute later, never a wrong answer. Waiting would put the Manager's
 * two round trips back into the engine's next request exactly when the Manager is slowest. The
 * default budget, 64 MiB, holds 512 of the serving benchmark's 128 KiB pages (the largest request
 * publishes 20).
 *
 * <p>Design note (close abandons): {@link #close} drops the batches not yet started (counted) and
 * waits only for the one in flight, whose wait the client bounds by its reply timeout; a caller that
 * wants everything published calls {@link #awaitPublished} first. An engine shutting down should
 * not block on a Manager that may be gone.
 */
final class BackgroundPublisher implements AutoCloseable {

    private static final Logger LOG = Logger.getLogger(BackgroundPublisher.class.getName());

    /** A queued batch: its arena, its keys, its pages (views into the arena) and its size. */
    private record Batch(long sequence, Arena arena, List<StateKey> keys, List<PageToPublish> pages, long bytes) {
    }

    private final Function<List<PageToPublish>, List<PublishOutcome>> sink;
    private final Predicate<OrbitKvException> refusedForNow;
    private final long queueBytes;
    private final Thread thread;

    private final ReentrantLock lock = new ReentrantLock();
    /** Signalled when a batch is queued, a batch settles, or close begins. */
    private final Condition changed = lock.newCondition();
    // @GuardedBy("lock") from here on
    private final ArrayDeque<Batch> queue = new ArrayDeque<>();
    private long offeredSequence;
    /** The batch the publisher thread holds; null when none. */
    private Batch inFlight;
    private long queuedBytes;
    private long heldBytes;
    private boolean closing;
    private long pagesQueued;
    private long sealed;
    private long alreadyPresent;
    private long refused;
    private long droppedFull;
    private long droppedFailed;
    private long droppedClosed;
    private long errors;
    private long queuedBytesHighWater;

    /**
     * Starts the publisher thread ({@code name}). {@code refusedForNow} tells a Manager's refusal of
     * the whole publish (counted refused) from a failure (counted dropped and as an error).
     */
    BackgroundPublisher(String name, long queueBytes, Function<List<PageToPublish>, List<PublishOutcome>> sink,
                        Predicate<OrbitKvException> refusedForNow) {
        if (queueBytes <= 0) throw new IllegalArgumentException("queueBytes must be > 0: " + queueBytes);
        this.sink = sink;
        this.refusedForNow = refusedForNow;
        this.queueBytes = queueBytes;
        this.thread = Thread.ofPlatform().name(name).daemon().unstarted(this::runLoop);
        thread.start();
    }

    /**
     * Copies one image per key (filled by {@code writer}, on the calling thread) into a new batch
     * and queues it; returns at once. A batch that does not fit the byte budget, or arrives after
     * {@link #close}, is dropped: its pages are reported refused and counted in
     * {@link PublishStats#droppedFull}. A writer that throws leaves nothing queued and nothing held.
     */
    KvPageStore.PublishReport offer(int groupId, List<StateKey> keys, long imageBytes, KvPageStore.PageImageWriter writer) {
        int n = keys.size();
        long bytes = Math.multiplyExact(imageBytes, (long) n);
        lock.lock();
        try {
            if (closing || queuedBytes + bytes > queueBytes) {
                droppedFull += n;
                return new KvPageStore.PublishReport(0, 0, n);
            }
            queuedBytes += bytes;   // reserved now, so that two offering threads cannot both overshoot
            heldBytes += bytes;
            queuedBytesHighWater = Math.max(queuedBytesHighWater, queuedBytes);
        } finally {
            lock.unlock();
        }
        Arena arena = Arena.ofShared();
        List<PageToPublish> pages = new ArrayList<>(n);
        try {
            MemorySegment images = arena.allocate(bytes, 64);
            for (int i = 0; i < n; i++) {
                MemorySegment image = images.asSlice(i * imageBytes, imageBytes);
                writer.write(i, image);
                pages.add(PageToPublish.ofKey(groupId, keys.get(i), image));
            }
        } catch (RuntimeException | Error e) {
            arena.close();
            lock.lock();
            try {
                queuedBytes -= bytes;
                heldBytes -= bytes;
            } finally {
                lock.unlock();
            }
            throw e;
        }
        Batch abandoned = null;
        lock.lock();
        try {
            Batch batch = new Batch(++offeredSequence, arena, List.copyOf(keys), List.copyOf(pages), bytes);
            if (closing) {
                abandoned = batch;   // close began while the images were copied
            } else {
                queue.addLast(batch);
                pagesQueued += n;
                changed.signalAll();
            }
        } finally {
            lock.unlock();
        }
        if (abandoned != null) {
            free(abandoned, Settled.CLOSED);
            return new KvPageStore.PublishReport(0, 0, n);
        }
        return KvPageStore.PublishReport.queued(n);
    }

    /**
     * Waits until every batch queued before this call has settled (published, refused or dropped),
     * at most {@code timeout}; returns whether it did. Batches offered meanwhile are not waited for.
     */
    boolean awaitPublished(Duration timeout) throws InterruptedException {
        lock.lock();
        try {
            return awaitSettledUpTo(offeredSequence, timeout);
        } finally {
            lock.unlock();
        }
    }

    /**
     * Waits at most {@code timeout} until no batch queued or in flight holds one of {@code keys};
     * returns whether none does. A lookup calls it so that a request does not recompute pages its
     * engine computed a moment ago and has not yet published.
     */
    boolean awaitKeysPublished(Collection<StateKey> keys, Duration timeout) throws InterruptedException {
        lock.lock();
        try {
            return awaitSettledUpTo(lastSequenceHolding(keys), timeout);
        } finally {
            lock.unlock();
        }
    }

    /** With {@code lock} held: waits at most {@code timeout} until every batch of sequence {@code <= target} settled. */
    private boolean awaitSettledUpTo(long target, Duration timeout) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (unsettledUpTo(target)) {
            long left = deadline - System.nanoTime();
            if (left <= 0) return false;
            changed.awaitNanos(left);
        }
        return true;
    }

    /** The highest sequence of a queued or in-flight batch holding one of {@code keys}; 0 when none. */
    private long lastSequenceHolding(Collection<StateKey> keys) {
        if (queue.isEmpty() && inFlight == null) return 0;
        Set<StateKey> wanted = new HashSet<>(keys);
        Iterator<Batch> newestFirst = queue.descendingIterator();
        while (newestFirst.hasNext()) {
            Batch b = newestFirst.next();
            for (StateKey k : b.keys()) if (wanted.contains(k)) return b.sequence();
        }
        if (inFlight != null) for (StateKey k : inFlight.keys()) if (wanted.contains(k)) return inFlight.sequence();
        return 0;
    }

    /** Whether a batch of sequence {@code <= target} is still queued or in flight (the queue is in sequence order). */
    private boolean unsettledUpTo(long target) {
        Batch head = queue.peekFirst();
        return (head != null && head.sequence() <= target) || (inFlight != null && inFlight.sequence() <= target);
    }

    PublishStats stats() {
        lock.lock();
        try {
            return new PublishStats(pagesQueued, sealed, alreadyPresent, refused, droppedFull, droppedFailed, droppedClosed,
                    errors, queuedBytes, queuedBytesHighWater, heldBytes);
        } finally {
            lock.unlock();
        }
    }

    /**
     * Abandons the batches not yet handed to the sink (freed, counted in {@link PublishStats#droppedClosed}),
     * waits for the publisher thread to finish the batch in flight and exit. Idempotent.
     */
    @Override
    public void close() {
        List<Batch> abandoned;
        lock.lock();
        try {
            closing = true;
            abandoned = new ArrayList<>(queue);
            queue.clear();
            changed.signalAll();
        } finally {
            lock.unlock();
        }
        for (Batch b : abandoned) free(b, Settled.CLOSED);
        boolean interrupted = false;
        while (thread.isAlive() && Thread.currentThread() != thread) {
            try {
                thread.join();
            } catch (InterruptedException e) {
                interrupted = true;   // the join is needed for the no-leak invariant; the flag is kept
            }
        }
        if (interrupted) Thread.currentThread().interrupt();
    }

    private void runLoop() {
        while (true) {
            Batch batch;
            lock.lock();
            try {
                while (queue.isEmpty() && !closing) changed.awaitUninterruptibly();
                if (queue.isEmpty()) return;   // closing, and close took what was queued
                batch = queue.pollFirst();
                queuedBytes -= batch.bytes();
                inFlight = batch;
            } finally {
                lock.unlock();
            }
            publish(batch);
        }
    }

    private enum Settled { PUBLISHED, FAILED, CLOSED }

    /** Publishes one batch on the publisher thread; never throws. */
    private void publish(Batch batch) {
        List<PublishOutcome> outcomes = null;
        Settled how = Settled.PUBLISHED;
        try {
            outcomes = sink.apply(batch.pages());
        } catch (OrbitKvException e) {
            if (!refusedForNow.test(e)) {
                how = failed(batch, e);
            }
        } catch (RuntimeException e) {
            how = failed(batch, e);
        }
        int s = 0;
        int p = 0;
        int r = 0;
        if (how == Settled.PUBLISHED) {
            if (outcomes == null) {
                r = batch.pages().size();   // refused for now as a whole, as the synchronous publish counts it
            } else {
                for (PublishOutcome outcome : outcomes) {
                    switch (outcome) {
                        case SEALED -> s++;
                        case DISCARDED, ALREADY_RESIDENT -> p++;
                        case NO_SPACE, BUSY, NOT_FOUND -> r++;
                    }
                }
            }
        }
        lock.lock();
        try {
            sealed += s;
            alreadyPresent += p;
            refused += r;
        } finally {
            lock.unlock();
        }
        free(batch, how);
    }

    private Settled failed(Batch batch, RuntimeException e) {
        LOG.log(Level.FINE, "background publish of " + batch.pages().size() + " pages failed", e);
        return Settled.FAILED;
    }

    /** Closes the batch's arena (exactly once per batch: every batch reaches here once) and settles it. */
    private void free(Batch batch, Settled how) {
        batch.arena().close();
        lock.lock();
        try {
            heldBytes -= batch.bytes();
            switch (how) {
                case PUBLISHED -> { }
                case FAILED -> {
                    errors++;
                    droppedFailed += batch.pages().size();
                }
                case CLOSED -> {
                    droppedClosed += batch.pages().size();
                    queuedBytes -= batch.bytes();
                }
            }
            if (inFlight == batch) inFlight = null;
            changed.signalAll();
        } finally {
            lock.unlock();
        }
    }
}
