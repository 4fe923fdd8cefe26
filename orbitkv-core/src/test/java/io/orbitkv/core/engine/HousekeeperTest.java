package io.orbitkv.core.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class HousekeeperTest {

    private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
    private final List<LogRecord> logged = new CopyOnWriteArrayList<>();
    private final Logger julLogger = Logger.getLogger(Housekeeper.class.getName());
    private final Handler capture = new Handler() {
        @Override
        public void publish(LogRecord r) {
            logged.add(r);
        }

        @Override
        public void flush() {
        }

        @Override
        public void close() {
        }
    };

    @BeforeEach
    void captureLog() {
        julLogger.addHandler(capture);
    }

    @AfterEach
    void releaseLog() {
        julLogger.removeHandler(capture);
    }

    @Test
    void aFailingDutyIsCountedAndLoggedAndTheOtherDutiesAndTheTickThreadKeepRunning() {
        AtomicInteger healthyRuns = new AtomicInteger();
        AtomicInteger failingRuns = new AtomicInteger();
        try (Housekeeper h = new Housekeeper(5, System::nanoTime, registry)) {
            h.addDuty("healthy", now -> healthyRuns.incrementAndGet());
            h.addDuty("failing", now -> {
                failingRuns.incrementAndGet();
                throw new IllegalStateException("duty bug");
            });
            assertThat(h.tick(0)).as("the first duty's count").isEqualTo(1);
            h.start();
            // the tick thread survives the failure: both duties keep being run on it
            await().atMost(Duration.ofSeconds(10)).until(() -> failingRuns.get() >= 3 && healthyRuns.get() >= 3);
            assertThat(h.errors("failing", false)).isGreaterThanOrEqualTo(3);
            assertThat(h.errors("healthy", false)).isZero();
            assertThat(registry.get("orbitkv.manager.background.errors").tag("duty", "failing").counter().count())
                    .isGreaterThanOrEqualTo(3);
        }
        // rate-limited: the failures of one duty within 10 s are one ERROR line naming the duty and the cause
        assertThat(logged).hasSize(1);
        assertThat(logged.getFirst().getLevel()).isEqualTo(Level.SEVERE);
        assertThat(logged.getFirst().getMessage()).contains("'failing'").contains("duty bug");
    }

    @Test
    void aFailingCallbackIsCountedUnderItsDutyAndLogged() {
        try (Housekeeper h = new Housekeeper(1_000, System::nanoTime, registry)) {
            h.callbacks().execute(() -> {
                throw new IllegalArgumentException("callback bug");
            });
            await().atMost(Duration.ofSeconds(10)).until(() -> h.errors("callback", true) == 1);
            assertThat(registry.get("orbitkv.manager.callbacks.inflight").gauge().value()).isZero();
        }
        assertThat(logged).singleElement().satisfies(r -> assertThat(r.getMessage()).contains("callback bug"));
    }

    @Test
    void aScheduledTaskRunsOnACallbackThreadAndCanBeCancelled() throws Exception {
        try (Housekeeper h = new Housekeeper(1_000, System::nanoTime, registry)) {
            java.util.concurrent.CompletableFuture<String> ran = new java.util.concurrent.CompletableFuture<>();
            h.schedule("timer", () -> ran.complete(Thread.currentThread().getName()), 1_000_000L);
            assertThat(ran.get(10, java.util.concurrent.TimeUnit.SECONDS)).startsWith("orbitkv-callback-");
            AtomicInteger cancelledRuns = new AtomicInteger();
            Runnable cancel = h.schedule("timer", cancelledRuns::incrementAndGet, 60_000_000_000L);
            cancel.run();
            assertThat(cancelledRuns).hasValue(0);
        }
    }
}
