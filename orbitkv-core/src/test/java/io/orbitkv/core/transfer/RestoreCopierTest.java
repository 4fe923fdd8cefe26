package io.orbitkv.core.transfer;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

class RestoreCopierTest {

    @TempDir
    Path dir;

    /** A task that holds its copy thread until {@code gate} opens. */
    private static Runnable blockedOn(CountDownLatch gate) {
        return () -> {
            try {
                gate.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        };
    }

    @Test
    void aBatchIsSubmittedWholeOrRefusedWhole() throws InterruptedException {
        RestoreCopier copier = new RestoreCopier(1, 3);
        CountDownLatch gate = new CountDownLatch(1);
        Runnable blocked = blockedOn(gate);
        assertThat(copier.trySubmit(List.of(blocked, blocked))).isTrue();
        assertThat(copier.trySubmit(List.of(blocked, blocked))).as("2 + 2 > 3").isFalse();
        assertThat(copier.tasksInFlight()).isEqualTo(2);
        assertThat(copier.refusals()).isEqualTo(1);
        gate.countDown();
        await().atMost(Duration.ofSeconds(10)).until(() -> copier.tasksInFlight() == 0);
        assertThat(copier.trySubmit(List.of(blocked, blocked, blocked))).isTrue();
        assertThat(copier.close(TimeUnit.SECONDS.toNanos(10))).isTrue();
        assertThat(copier.trySubmit(List.of(blocked))).as("closed").isFalse();
    }

    @Test
    void aHelperRunsOnlyOnAnIdleThread() throws InterruptedException {
        RestoreCopier copier = new RestoreCopier(2, 8);
        CountDownLatch gate = new CountDownLatch(1);
        CountDownLatch ran = new CountDownLatch(1);
        Runnable blocked = blockedOn(gate);
        assertThat(copier.trySubmit(List.of(blocked))).isTrue();
        assertThat(copier.tryHelp(blocked)).as("one of two threads idle").isTrue();
        assertThat(copier.tryHelp(ran::countDown)).as("both busy: not queued behind them").isFalse();
        assertThat(copier.tasksInFlight()).isEqualTo(2);
        assertThat(copier.helpers()).isEqualTo(1);
        gate.countDown();
        await().atMost(Duration.ofSeconds(10)).until(() -> copier.tasksInFlight() == 0);
        assertThat(copier.tryHelp(ran::countDown)).isTrue();
        assertThat(ran.await(10, TimeUnit.SECONDS)).isTrue();
        assertThat(copier.close(TimeUnit.SECONDS.toNanos(10))).isTrue();
        assertThat(copier.tryHelp(ran::countDown)).as("closed").isFalse();
        assertThat(copier.helpers()).isEqualTo(2);
    }

    @Test
    void aRegionMapsItsFileOrIsNotFound() throws IOException {
        Path file = Files.write(dir.resolve("region"), new byte[3 * 4096]);
        assertThat(EngineRegion.open(file.toString(), 4 * 4096, 4096, 4)).isInstanceOf(EngineRegion.NotFound.class);
        assertThat(EngineRegion.open("relative/path", 4096, 4096, 1)).isInstanceOf(EngineRegion.NotFound.class);
        assertThat(EngineRegion.open(dir.resolve("absent").toString(), 4096, 4096, 1)).isInstanceOf(EngineRegion.NotFound.class);
        EngineRegion region = ((EngineRegion.Opened) EngineRegion.open(file.toString(), 3 * 4096, 4096, 3)).region();
        MemorySegment page = region.page(2, 10);
        page.fill((byte) 7);
        region.close();
        region.close();
        byte[] all = Files.readAllBytes(file);
        assertThat(all[2 * 4096]).isEqualTo((byte) 7);
        assertThat(all[2 * 4096 + 10]).isZero();
        assertThat(MemorySegment.ofArray(all).get(ValueLayout.JAVA_BYTE, 4096)).isZero();
    }
}
