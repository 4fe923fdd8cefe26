package io.orbitkv.core.query;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class BudgetTest {

    @Test
    void takesAllOrNothingAndNeverPassesItsCapacity() {
        Budget b = new Budget("leases", "leases", 10);
        assertThat(b.tryAcquire(7)).isTrue();
        assertThat(b.tryAcquire(4)).isFalse();
        assertThat(b.used()).as("a refusal takes nothing").isEqualTo(7);
        assertThat(b.tryAcquire(3)).isTrue();
        assertThat(b.tryAcquire(0)).isTrue();
        b.release(10);
        assertThat(b.used()).isZero();
        assertThatThrownBy(() -> b.release(1)).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void concurrentTakersNeverOvershoot() throws InterruptedException {
        Budget b = new Budget("bytes", "bytes", 1000);
        AtomicLong maxSeen = new AtomicLong();
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < 4; t++) {
            threads.add(Thread.ofPlatform().start(() -> {
                try {
                    start.await();
                } catch (InterruptedException e) {
                    return;
                }
                for (int i = 0; i < 20_000; i++) {
                    long n = 1 + (i % 97);
                    if (b.tryAcquire(n)) {
                        maxSeen.accumulateAndGet(b.used(), Math::max);
                        b.release(n);
                    }
                }
            }));
        }
        start.countDown();
        for (Thread t : threads) t.join();
        assertThat(maxSeen.get()).isLessThanOrEqualTo(1000);
        assertThat(b.used()).isZero();
    }
}
