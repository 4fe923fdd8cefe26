package io.orbitkv.core.storage.ssd;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.cost.CostObserver;
import io.orbitkv.core.storage.residency.ResidencyStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicBoolean;

import static io.orbitkv.core.storage.ssd.SsdTestSupport.NS;
import static io.orbitkv.core.storage.ssd.SsdTestSupport.key;
import static io.orbitkv.core.storage.ssd.SsdTestSupport.payload;
import static org.assertj.core.api.Assertions.assertThat;

/** A store opened with a decorated {@link ExtentDevice} does its I/O through it, and never serves what it lies about. */
class ExtentDeviceSeamTest {

    @TempDir
    Path dir;

    @Test
    void aDeviceThatFlipsAByteOnReadIsAnsweredCorruptAndTheExtentDropped() throws IOException {
        AtomicBoolean lie = new AtomicBoolean();
        ExtentDevice.Wrapper flipping = device -> new ExtentDevice() {
            @Override
            public void write(int file, long offset, MemorySegment header, MemorySegment payload) throws IOException {
                device.write(file, offset, header, payload);
            }

            @Override
            public ReadBytes read(int file, long offset, MemorySegment header, MemorySegment payload) throws IOException {
                ReadBytes got = device.read(file, offset, header, payload);
                if (lie.get()) payload.set(ValueLayout.JAVA_BYTE, 100, (byte) ~payload.get(ValueLayout.JAVA_BYTE, 100));
                return got;
            }
        };
        SsdConfig config = SsdTestSupport.smallConfig(dir, 2, 256).withReadPath(ReadPath.POSITIONAL);
        try (SsdStore store = SsdStore.openDecorated(config, new ResidencyStream(64), new SimpleMeterRegistry(),
                CostObserver.disabled(), flipping)) {
            store.recover();
            assertThat(store.write(NS, key(1), payload(1, 10_000), 10_000).join()).isInstanceOf(WriteResult.Committed.class);
            MemorySegment dst = SsdTestSupport.SHARED.allocate(16 * 1024, 4096);
            try (Pin pin = (Pin) store.pin(key(1), SsdTestSupport.NS)) {
                assertThat(store.read(pin, dst).join()).isInstanceOf(ReadResult.Served.class);
            }
            lie.set(true);
            try (Pin pin = (Pin) store.pin(key(1), SsdTestSupport.NS)) {
                assertThat(store.read(pin, dst).join()).isEqualTo(new ReadResult.Corrupt(ExtentDamage.BAD_PAYLOAD_CRC));
            }
            assertThat(store.contains(key(1))).as("dropped, never served again").isFalse();
        }
    }
}
