package io.orbitkv.core.storage.ssd;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.cost.ByteCount;
import io.orbitkv.core.cost.CostConfig;
import io.orbitkv.core.cost.CostKey;
import io.orbitkv.core.cost.CostObserver;
import io.orbitkv.core.cost.Lookup;
import io.orbitkv.core.cost.Observation;
import io.orbitkv.core.cost.ShadowOutcome;
import io.orbitkv.core.cost.Terminal;
import io.orbitkv.core.cost.Timeline;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.core.storage.ssd.uring.UringReader;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import static io.orbitkv.core.storage.ssd.SsdTestSupport.key;
import static io.orbitkv.core.storage.ssd.SsdTestSupport.payload;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

/** The two read routes over the same extents, the fail-closed setting, and their cost observations. */
class SsdReadRouteTest {

    private static final int[] LENGTHS = {1, 4096, 5000, 60_000, 65_536};

    @TempDir
    Path dir;

    private SsdConfig config(ReadPath path) {
        return SsdTestSupport.smallConfig(dir, 2, 512).withReadPath(path).withUringInflightReads(8);
    }

    private SsdStore open(ReadPath path, CostObserver observer) throws IOException {
        SsdStore s = SsdStore.open(config(path), new ResidencyStream(4096), new SimpleMeterRegistry(), observer);
        s.recover();
        return s;
    }

    private void writeExtents() throws IOException {
        try (SsdTestSupport s = SsdTestSupport.openRecovered(config(ReadPath.POSITIONAL))) {
            for (int i = 0; i < LENGTHS.length; i++) s.writeCommitted(i, LENGTHS[i]);
        }
    }

    /** Reads every extent into aligned and heap destinations; returns the served bytes. */
    private static List<byte[]> readAll(SsdStore store) {
        List<byte[]> out = new ArrayList<>();
        for (int i = 0; i < LENGTHS.length; i++) {
            try (Pin pin = (Pin) store.pin(key(i), SsdTestSupport.NS)) {
                MemorySegment aligned = SsdTestSupport.SHARED.allocate(pin.paddedPayloadBytes(), 4096);
                assertThat(store.read(pin, aligned).join()).isEqualTo(new ReadResult.Served(LENGTHS[i], false));
                byte[] heap = new byte[LENGTHS[i]];
                assertThat(store.read(pin, MemorySegment.ofArray(heap)).join()).isEqualTo(new ReadResult.Served(LENGTHS[i], true));
                assertThat(aligned.asSlice(0, LENGTHS[i]).mismatch(MemorySegment.ofArray(heap))).isEqualTo(-1);
                out.add(heap);
            }
        }
        return out;
    }

    @Test
    void bothRoutesServeByteIdenticalPayloadsOfTheSameExtents() throws IOException {
        writeExtents();
        List<byte[]> positional;
        try (SsdStore s = open(ReadPath.POSITIONAL, CostObserver.disabled())) {
            assertThat(s.readPath()).isEqualTo(ReadPath.POSITIONAL);
            positional = readAll(s);
        }
        try (SsdStore s = open(ReadPath.URING, CostObserver.disabled())) {
            assertThat(s.readPath()).isEqualTo(ReadPath.URING);
            List<byte[]> uring = readAll(s);
            for (int i = 0; i < LENGTHS.length; i++) {
                assertThat(uring.get(i)).as("extent %d", i).isEqualTo(positional.get(i));
                assertThat(MemorySegment.ofArray(uring.get(i)).mismatch(payload(i, LENGTHS[i]).asSlice(0, LENGTHS[i])))
                        .isEqualTo(-1);
            }
            assertThat(s.readerPins()).isZero();
            // a future completes inside its completion, which then returns and stops counting
            await().atMost(10, TimeUnit.SECONDS).until(() -> s.uringInflight() == 0);
        }
        try (SsdStore s = open(ReadPath.AUTO, CostObserver.disabled())) {
            assertThat(s.readPath()).isEqualTo(ReadPath.URING); // io_uring is allowed on these hosts
        }
    }

    @ParameterizedTest
    @EnumSource(value = ReadPath.class, names = {"URING", "POSITIONAL"})
    void eachRouteDetectsPayloadAndHeaderCorruptionAndDropsTheExtent(ReadPath route) throws IOException {
        writeExtents();
        try (SsdStore s = open(route, CostObserver.disabled())) {
            assertThat(s.readPath()).isEqualTo(route);
            Extent payloadVictim = s.indexedExtents().stream().filter(e -> e.key.equals(key(3))).findFirst().orElseThrow();
            Extent headerVictim = s.indexedExtents().stream().filter(e -> e.key.equals(key(4))).findFirst().orElseThrow();
            SsdTestSupport.flipByte(dir, payloadVictim.file, payloadVictim.offset + ExtentLayout.HEADER_BYTES + 777);
            SsdTestSupport.flipByte(dir, headerVictim.file, headerVictim.offset + ExtentLayout.OFF_GENERATION);
            try (Pin pin = (Pin) s.pin(key(3), SsdTestSupport.NS)) {
                MemorySegment dst = SsdTestSupport.SHARED.allocate(pin.paddedPayloadBytes(), 4096);
                assertThat(s.read(pin, dst).join()).isEqualTo(new ReadResult.Corrupt(ExtentDamage.BAD_PAYLOAD_CRC));
            }
            try (Pin pin = (Pin) s.pin(key(4), SsdTestSupport.NS)) {
                MemorySegment dst = SsdTestSupport.SHARED.allocate(pin.paddedPayloadBytes(), 4096);
                assertThat(s.read(pin, dst).join()).isInstanceOf(ReadResult.Corrupt.class);
            }
            assertThat(s.contains(key(3))).isFalse();
            assertThat(s.contains(key(4))).isFalse();
            assertThat(s.contains(key(2))).isTrue();
            assertThat(s.readerPins()).isZero();
        }
    }

    @Test
    void cancelledReadsKeepTheirBuffersAndPinsUntilCompletionThenReleaseThem() throws IOException {
        writeExtents();
        AtomicLong clock = new AtomicLong();
        CostObserver observer = CostObserver.create(CostConfig.defaults(true), new SimpleMeterRegistry(), clock::get);
        try (SsdStore s = open(ReadPath.URING, observer)) {
            List<CompletableFuture<ReadResult>> futures = new ArrayList<>();
            List<Pin> pins = new ArrayList<>();
            for (int round = 0; round < 8; round++) {
                Pin pin = (Pin) s.pin(key(4), SsdTestSupport.NS);
                pins.add(pin);
                futures.add(s.read(pin, SsdTestSupport.SHARED.allocate(pin.paddedPayloadBytes(), 4096)));
            }
            Extent e = pins.getFirst().extent();
            long cancelled = futures.stream().filter(f -> f.cancel(false)).count();
            pins.forEach(s::unpin); // the caller walks away at once
            // a read still in flight holds its own extent pin, so the ring cannot reuse the bytes
            // yet (the slot-holding itself is shown on a pipe in UringReaderTest)
            assertThat(e.pins()).isLessThanOrEqualTo(8);
            await().atMost(10, TimeUnit.SECONDS).until(() -> s.uringInflight() == 0);
            assertThat(e.pins()).isZero();
            // all 8 header buffers came back: a full burst is served again, none is Busy
            List<CompletableFuture<ReadResult>> again = new ArrayList<>();
            try (Pin pin = (Pin) s.pin(key(4), SsdTestSupport.NS)) {
                for (int i = 0; i < 8; i++) again.add(s.read(pin, SsdTestSupport.SHARED.allocate(pin.paddedPayloadBytes(), 4096)));
                again.forEach(f -> assertThat(f.join()).isInstanceOf(ReadResult.Served.class));
            }
            // a read whose caller had cancelled when its completion ran is censored: counted,
            // never trained (a cancel that lands after that point finds a served read)
            long censored = observer.status().censored().get(Terminal.CANCELLED);
            assertThat(censored).isBetween(0L, cancelled);
            assertThat(observer.status().trained()).isEqualTo(2 * (8 - censored) + 2 * 8);
        }
    }

    @Test
    void aForcedUringRouteThatCannotBeSetUpFailsClosedAndAutoFallsBack() throws IOException {
        writeExtents();
        var registry = new SimpleMeterRegistry();
        assertThatThrownBy(() -> SsdStore.open(config(ReadPath.URING), new ResidencyStream(64), registry,
                CostObserver.disabled(), depth -> new UringReader.Open.Unavailable("test: io_uring_setup refused")))
                .isInstanceOf(IOException.class)
                .hasMessageContaining("read path 'uring' was forced").hasMessageContaining("test: io_uring_setup refused");
        try (SsdStore s = SsdStore.open(config(ReadPath.AUTO), new ResidencyStream(4096), new SimpleMeterRegistry(),
                CostObserver.disabled(), depth -> new UringReader.Open.Unavailable("test: io_uring_setup refused"))) {
            s.recover();
            assertThat(s.readPath()).isEqualTo(ReadPath.POSITIONAL);
            assertThat(readAll(s)).hasSize(LENGTHS.length);
        }
        assertThat(ReadPath.parse(" Uring ")).isEqualTo(ReadPath.URING);
        assertThatThrownBy(() -> ReadPath.parse("cufile")).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void executedReadsTrainTheirRouteAndShadowFlipsToFasterWhenTheOtherRouteIsMeasuredFaster() throws IOException {
        writeExtents();
        AtomicLong clock = new AtomicLong();
        CostObserver observer = CostObserver.create(CostConfig.defaults(true), new SimpleMeterRegistry(), clock::get);
        try (SsdStore s = open(ReadPath.POSITIONAL, observer)) {
            CostKey positionalKey;
            CostKey uringKey;
            try (Pin pin = (Pin) s.pin(key(4), SsdTestSupport.NS)) {
                positionalKey = s.costKey(ReadPath.POSITIONAL, pin);
                uringKey = s.costKey(ReadPath.URING, pin);
                for (int i = 0; i < 4; i++) {
                    assertThat(s.read(pin, SsdTestSupport.SHARED.allocate(pin.paddedPayloadBytes(), 4096)).join())
                            .isInstanceOf(ReadResult.Served.class);
                }
            }
            assertThat(observer.estimate(positionalKey)).isInstanceOf(Lookup.Warm.class);
            assertThat(observer.status().shadow()).containsEntry(ShadowOutcome.UNKNOWN, 4L); // uring never observed
            // injected latency: positional reads on this store measured at 10 ms (a slow device
            // moment), the io_uring route at 1 µs per complete read
            for (int i = 0; i < 30; i++) {
                observer.record(new Observation(positionalKey, Terminal.SUCCEEDED, new Timeline(0, 0, 0, 10_000_000),
                        ByteCount.known(65_536), ByteCount.known(69_632)));
            }
            for (int i = 0; i < 4; i++) {
                observer.record(new Observation(uringKey, Terminal.SUCCEEDED, new Timeline(0, 0, 0, 1_000),
                        ByteCount.known(65_536), ByteCount.known(69_632)));
            }
            try (Pin pin = (Pin) s.pin(key(4), SsdTestSupport.NS)) {
                s.read(pin, SsdTestSupport.SHARED.allocate(pin.paddedPayloadBytes(), 4096)).join();
            }
            assertThat(observer.status().shadow()).containsEntry(ShadowOutcome.FASTER, 1L);
            assertThat(s.readPath()).isEqualTo(ReadPath.POSITIONAL); // shadow never changes execution
        }
    }
}
