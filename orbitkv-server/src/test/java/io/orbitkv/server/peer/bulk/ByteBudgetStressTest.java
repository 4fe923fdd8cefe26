package io.orbitkv.server.peer.bulk;

import io.orbitkv.testkit.StressTest;
import io.orbitkv.testkit.TestSeed;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@link ByteBudget} under 16 threads taking and giving back random amounts: the bytes held by
 * the threads (counted independently) never exceed the capacity, the budget's peak never exceeds
 * it, and everything is back at the end. The seed is {@link TestSeed}'s, named in any failure ({@code -Dorbitkv.seed=N} fixes it).
 */
@StressTest
class ByteBudgetStressTest {

    @Test
    void heldBytesNeverExceedTheCapacityAndAllReturn() throws Exception {
        long seed = TestSeed.get();
        long capacity = 8L << 20;
        ByteBudget budget = new ByteBudget(capacity);
        AtomicLong held = new AtomicLong();
        AtomicLong mostHeld = new AtomicLong();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < 16; t++) {
            SplittableRandom random = new SplittableRandom(seed + t);
            threads.add(Thread.ofPlatform().start(() -> {
                try {
                    start.await();
                    for (int i = 0; i < 2_000; i++) {
                        long bytes = 1 + random.nextLong(3L << 20);
                        if (!budget.acquire(bytes, random.nextInt(4) == 0 ? 0 : 1_000_000)) continue;
                        mostHeld.accumulateAndGet(held.addAndGet(bytes), Math::max);
                        held.addAndGet(-bytes);
                        budget.release(bytes);
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            }));
        }
        start.countDown();
        for (Thread t : threads) t.join();
        assertThat(failure.get()).as("seed %d", seed).isNull();
        assertThat(mostHeld.get()).as("seed %d: bytes held at once", seed).isBetween(1L, capacity);
        assertThat(budget.peak()).as("seed %d", seed).isLessThanOrEqualTo(capacity);
        assertThat(budget.used()).as("seed %d", seed).isZero();
        assertThat(budget.acquire(capacity + 1, 0)).as("more than the capacity is never granted").isFalse();
    }
}
