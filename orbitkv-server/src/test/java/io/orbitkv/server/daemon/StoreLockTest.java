package io.orbitkv.server.daemon;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** One holder at a time, the pid in the file, release on close, and a leftover file is not a holder. */
class StoreLockTest {

    @TempDir
    Path dir;

    @Test
    void oneHolderAtATimeWithItsPidAndReleaseRemovesTheFile() throws Exception {
        Path file = dir.resolve("store/manager.lock");
        Optional<StoreLock> first = StoreLock.tryAcquire(file);
        assertThat(first).isPresent();
        assertThat(StoreLock.holderPid(file)).contains(ProcessHandle.current().pid());
        assertThat(StoreLock.tryAcquire(file)).isEmpty();
        first.get().close();
        first.get().close();
        assertThat(file).doesNotExist();
        try (StoreLock again = StoreLock.tryAcquire(file).orElseThrow()) {
            assertThat(again.file()).isEqualTo(file);
        }
    }

    @SuppressWarnings("try") // the lock is held for the assertion
    @Test
    void aLeftoverFileFromADeadManagerIsLockedAgain() throws Exception {
        Path file = Files.writeString(dir.resolve("manager.lock"), "999999999\n");
        try (StoreLock lock = StoreLock.tryAcquire(file).orElseThrow()) {
            assertThat(StoreLock.holderPid(file)).contains(ProcessHandle.current().pid());
        }
        assertThat(StoreLock.holderPid(dir.resolve("absent"))).isEmpty();
    }
}
