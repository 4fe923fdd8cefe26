package io.orbitkv.core.storage.ssd;

import io.orbitkv.testkit.ProcessTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A really full filesystem: a 1 MiB tmpfs holding a ring of 3 × 384 KiB files. Two files
 * preallocate, the third hits ENOSPC; the write that needed it answers NoSpace, reads go on,
 * and the ring continues inside the files it has.
 */
@ProcessTest
class SsdNoSpaceTest {

    private static final int PAYLOAD = 60_000; // 64 KiB footprint, 6 per file

    @TempDir
    Path dir;

    @SuppressWarnings("try") // the mount is held for the test body
    @Test
    void enospcAtPreallocationFailsAdmissionWithNoSpaceAndReadsKeepWorking() throws Exception {
        Path mountPoint = Files.createDirectories(dir.resolve("tiny"));
        try (Mounts ignored = Mounts.mount("tmpfs", "size=1m", mountPoint)) {
            SsdConfig config = SsdTestSupport.smallConfig(mountPoint, 3, 384).withBufferedFallback(true);
            try (SsdTestSupport s = SsdTestSupport.openRecovered(config)) {
                for (int k = 0; k < 12; k++) s.writeCommitted(k, PAYLOAD);

                assertThat(s.write(12, PAYLOAD)).isEqualTo(new WriteResult.NoSpace());
                assertThat(s.counter("orbitkv.ssd.errors", "kind", "no_space")).isEqualTo(1);
                assertThat(Files.size(SsdTestSupport.file(mountPoint, 2))).as("failed preallocation released").isZero();
                assertThat(s.gauge("orbitkv.ssd.capacity")).isEqualTo(2 * 384 * 1024);

                for (int k = 0; k < 12; k++) assertThat(s.readAndCheck(k, PAYLOAD)).isInstanceOf(ReadResult.Served.class);

                s.writeCommitted(12, PAYLOAD); // the ring wraps inside the two files it has
                assertThat(s.store.contains(key0())).isFalse();
                assertThat(s.readAndCheck(12, PAYLOAD)).isInstanceOf(ReadResult.Served.class);
            }
            try (SsdTestSupport s = SsdTestSupport.open(config)) {
                assertThat(s.store.recover().extentsKept()).isEqualTo(12);
            }
        }
    }

    private static io.orbitkv.state.StateKey key0() {
        return SsdTestSupport.key(0);
    }
}
