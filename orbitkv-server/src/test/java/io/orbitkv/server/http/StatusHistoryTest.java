package io.orbitkv.server.http;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** The history ring: samples at its period, keeps only the newest {@code capacity}, skips a failing sample. */
class StatusHistoryTest {

    @Test
    void keepsTheNewestSamplesUpToItsCapacityAndSkipsFailures() {
        AtomicLong calls = new AtomicLong();
        try (StatusHistory h = StatusHistory.start(() -> {
            long n = calls.incrementAndGet();
            if (n == 2) throw new IllegalStateException("a status bug");
            return new StatusHistory.Sample(n, n * 10, n, 0, 0, n * 100, 0);
        }, 5, 3)) {
            await().atMost(Duration.ofSeconds(10)).until(() -> calls.get() >= 8);
            StatusHistory.Snapshot s = h.snapshot();
            assertThat(s.periodMillis()).isEqualTo(5);
            assertThat(s.samples()).hasSize(3);
            long first = s.samples().getFirst().timeMillis();
            assertThat(first).as("older samples dropped").isGreaterThan(3);
            assertThat(s.samples()).extracting(StatusHistory.Sample::timeMillis).isSorted().doesNotContain(2L);
        }
    }
}
