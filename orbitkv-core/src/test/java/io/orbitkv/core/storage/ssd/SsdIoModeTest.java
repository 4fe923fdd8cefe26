package io.orbitkv.core.storage.ssd;

import io.orbitkv.state.unix.FileTrees;
import io.orbitkv.testkit.Environment;
import io.orbitkv.testkit.ProcessTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * O_DIRECT versus buffered selection. On this kind of machine /tmp is ext4 (O_DIRECT works),
 * /dev/shm is tmpfs (O_DIRECT accepted since Linux 6.6, refused before), and ramfs refuses it
 * on every kernel, so ramfs is the filesystem that proves the refusal paths.
 */
@ProcessTest
class SsdIoModeTest {

    @TempDir
    Path dir;

    @Test
    void aDiskFilesystemGetsDirectIo() throws Exception {
        try (SsdTestSupport s = SsdTestSupport.openRecovered(SsdTestSupport.smallConfig(dir, 2, 256))) {
            assertThat(s.store.ioMode()).isEqualTo(IoMode.DIRECT);
            assertThat(s.gauge("orbitkv.ssd.direct_io")).isEqualTo(1.0);
            s.writeCommitted(1, 20_000);
            assertThat(s.readAndCheck(1, 20_000)).isInstanceOf(ReadResult.Served.class);
        }
    }

    @Test
    void devShmUsesWhatItsKernelOffersAndRefusesSilentFallback() throws Exception {
        Path shm = Path.of("/dev/shm");
        Environment.require(Files.isDirectory(shm) && Files.isWritable(shm), "a writable /dev/shm");
        Path storeDir = Files.createTempDirectory(shm, "orbitkv-ssd-");
        try {
            boolean kernelAcceptsDirect = acceptsDirect(storeDir);
            SsdConfig refuse = SsdTestSupport.smallConfig(storeDir, 2, 256).withBufferedFallback(false);
            if (kernelAcceptsDirect) {
                try (SsdTestSupport s = SsdTestSupport.openRecovered(refuse)) {
                    assertThat(s.store.ioMode()).isEqualTo(IoMode.DIRECT);
                }
            } else {
                assertThatThrownBy(() -> SsdTestSupport.open(refuse)).isInstanceOf(IOException.class)
                        .hasMessageContaining("allowBufferedFallback");
            }
            try (SsdTestSupport s = SsdTestSupport.openRecovered(refuse.withBufferedFallback(true))) {
                assertThat(s.store.ioMode()).isEqualTo(kernelAcceptsDirect ? IoMode.DIRECT : IoMode.BUFFERED);
                s.writeCommitted(1, 20_000);
                assertThat(s.readAndCheck(1, 20_000)).isInstanceOf(ReadResult.Served.class);
            }
        } finally {
            FileTrees.delete(storeDir);
        }
    }

    @SuppressWarnings("try") // the mount is held for the test body
    @Test
    void aFilesystemRefusingDirectIoFailsOpenUnlessFallbackIsAllowed() throws Exception {
        Path mountPoint = Files.createDirectories(dir.resolve("ramfs"));
        try (Mounts ignored = Mounts.mount("ramfs", "", mountPoint)) {
            Environment.require(!acceptsDirect(mountPoint), "a ramfs that refuses O_DIRECT (this kernel's accepts it)");
            SsdConfig config = SsdTestSupport.smallConfig(mountPoint, 2, 256);

            assertThatThrownBy(() -> SsdTestSupport.open(config.withBufferedFallback(false)))
                    .isInstanceOf(IOException.class)
                    .hasMessageContaining("refuses O_DIRECT")
                    .hasMessageContaining("allowBufferedFallback is false");

            try (SsdTestSupport s = SsdTestSupport.openRecovered(config.withBufferedFallback(true))) {
                assertThat(s.store.ioMode()).isEqualTo(IoMode.BUFFERED);
                assertThat(s.gauge("orbitkv.ssd.direct_io")).isEqualTo(0.0);
                for (int k = 0; k < 10; k++) s.writeCommitted(k, 30_000);
                for (int k = 0; k < 10; k++) assertThat(s.readAndCheck(k, 30_000)).isInstanceOf(ReadResult.Served.class);
            }
            try (SsdTestSupport s = SsdTestSupport.open(config.withBufferedFallback(true))) {
                assertThat(s.store.recover().extentsKept()).isEqualTo(10);
            }
        }
    }

    @SuppressWarnings("try") // the probe channel is opened only to see O_DIRECT accepted
    private static boolean acceptsDirect(Path dir) throws IOException {
        Path probe = dir.resolve("direct-probe");
        try (FileChannel ignored = FileChannel.open(probe, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                ExtentFiles.DIRECT)) {
            return true;
        } catch (IOException e) {
            return false;
        } finally {
            Files.deleteIfExists(probe);
        }
    }
}
