package io.orbitkv.bench.storage;

import io.orbitkv.core.storage.ssd.Pin;
import io.orbitkv.core.storage.ssd.ReadResult;
import io.orbitkv.core.storage.ssd.SsdStore;
import io.orbitkv.core.storage.ssd.WriteResult;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;

import java.lang.foreign.MemorySegment;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.LongFunction;

/**
 * Closed-loop load on an {@link SsdStore} at a fixed queue depth: {@code depth} lanes, each with
 * exactly one operation in flight; a lane issues its next operation from the completion of the
 * previous one, so the store's workers see exactly {@code depth} outstanding operations, as fio's
 * {@code --iodepth} does.
 *
 * <p>Thread model: {@link #readRound}/{@link #writeRound} block the caller until every lane has
 * stopped; lane bodies run on the store's I/O workers (completions), one operation per lane at
 * a time, so each lane's random generator and buffer are confined to it. Invariant: every pin
 * taken is released before its lane issues again.
 *
 * <p>Design note: completion-driven lanes need no client threads; 16 blocking client threads on
 * a 2-core machine would compete with the store's 16 workers for the CPU and measure the
 * scheduler. Anything but {@code Served}/{@code Committed} stops the round with an error, since
 * the benchmark's numbers would otherwise count failed operations.
 */
final class SsdLanes {

    /** What a round achieved: completed operations and the wall time, start to last completion. */
    record Round(long ops, long nanos) {
        double opsPerSecond() {
            return ops * 1e9 / nanos;
        }
    }

    private SsdLanes() {}

    /** Random verified reads of {@code keys} (all indexed in {@code namespace}) into per-lane aligned destinations. */
    static Round readRound(SsdStore store, NamespaceDigest namespace, StateKey[] keys, MemorySegment[] destinations,
                           int depth, long nanos, long seed) throws InterruptedException {
        Shared shared = new Shared(depth, nanos);
        for (int lane = 0; lane < depth; lane++) {
            new ReadLane(store, namespace, keys, destinations[lane], new SplittableRandom(seed + lane), shared).issue();
        }
        return shared.await();
    }

    /**
     * Writes of fresh keys ({@code keyOf.apply(next++)}, while {@code next < limit}) from per-lane
     * aligned payloads of {@code payloadBytes}, for {@code nanos}.
     */
    static Round writeRound(SsdStore store, NamespaceDigest namespace, LongFunction<StateKey> keyOf, AtomicLong next,
                            long limit, MemorySegment[] payloads, int payloadBytes, int depth, long nanos)
            throws InterruptedException {
        Shared shared = new Shared(depth, nanos);
        for (int lane = 0; lane < depth; lane++) {
            new WriteLane(store, namespace, keyOf, next, limit, payloads[lane % payloads.length], payloadBytes,
                    shared).issue();
        }
        return shared.await();
    }

    /** Round state shared by the lanes. */
    private static final class Shared {
        final long start = System.nanoTime();
        final long deadline;
        final CountDownLatch stopped;
        final AtomicLong ops = new AtomicLong();
        final AtomicReference<String> failure = new AtomicReference<>();

        Shared(int depth, long nanos) {
            this.deadline = start + Math.min(nanos, Long.MAX_VALUE / 4);
            this.stopped = new CountDownLatch(depth);
        }

        boolean keepGoing() {
            if (failure.get() == null && System.nanoTime() < deadline) return true;
            stopped.countDown();
            return false;
        }

        void fail(String why) {
            failure.compareAndSet(null, why);
            stopped.countDown();
        }

        Round await() throws InterruptedException {
            stopped.await();
            long nanos = System.nanoTime() - start;
            String f = failure.get();
            if (f != null) throw new IllegalStateException("SSD benchmark operation failed: " + f);
            return new Round(ops.get(), nanos);
        }
    }

    private record ReadLane(SsdStore store, NamespaceDigest namespace, StateKey[] keys, MemorySegment destination,
                            SplittableRandom random, Shared shared) {
        void issue() {
            if (!shared.keepGoing()) return;
            StateKey key = keys[random.nextInt(keys.length)];
            if (!(store.pin(key, namespace) instanceof Pin pin)) {
                shared.fail("key not indexed: " + key);
                return;
            }
            CompletableFuture<ReadResult> read = store.read(pin, destination);
            read.whenComplete((result, error) -> {
                store.unpin(pin);
                // A bounced read would add a copy fio does not make: count it as a failed setup.
                if (result instanceof ReadResult.Served served && !served.bounced()) {
                    shared.ops.incrementAndGet();
                    issue();
                } else {
                    shared.fail(result != null ? result.toString() : String.valueOf(error));
                }
            });
        }
    }

    private record WriteLane(SsdStore store, NamespaceDigest namespace, LongFunction<StateKey> keyOf,
                             AtomicLong next, long limit, MemorySegment payload, int payloadBytes, Shared shared) {
        void issue() {
            if (!shared.keepGoing()) return;
            long i = next.getAndIncrement();
            if (i >= limit) {
                shared.stopped.countDown();
                return;
            }
            StateKey key = keyOf.apply(i);
            store.write(namespace, key, payload, payloadBytes).whenComplete((result, error) -> {
                if (result instanceof WriteResult.Committed) {
                    shared.ops.incrementAndGet();
                    issue();
                } else {
                    shared.fail(result != null ? result.toString() : String.valueOf(error));
                }
            });
        }
    }
}
