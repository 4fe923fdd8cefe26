package io.orbitkv.server.daemon;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.server.config.ManagerConfig;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every file the Manager creates for its store (SSD extents, the ready file, both lock files) is
 * {@code 0600} and every directory it creates {@code 0700}, even under umask 0; the DRAM arenas
 * are memfds and leave no file at all.
 */
@SuppressWarnings("restricted") // umask(2) through FFM: Java has no call to set it
class OwnerOnlyFilesTest {

    private static final MethodHandle UMASK = Linker.nativeLinker().downcallHandle(
            Linker.nativeLinker().defaultLookup().find("umask").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));

    @TempDir
    Path dir;

    @Test
    void theManagersFilesAreOwnerOnlyWhateverTheUmask() throws Throwable {
        Path dram = dir.resolve("shm/dram");
        Path ssd = dir.resolve("var/ssd");
        Path ready = dir.resolve("run/ready/manager.ready");
        ManagerConfig config = ManagerConfig.defaults().withOverrides(Map.ofEntries(
                Map.entry("dramDir", dram.toString()), Map.entry("arenaName", "t"), Map.entry("dramBytes", "8m"),
                Map.entry("dramSlotBytes", "64k,256k"), Map.entry("stagingBytes", "512k"),
                Map.entry("ssdDir", ssd.toString()), Map.entry("ssdBytes", "2m"), Map.entry("ssdFiles", "2"),
                Map.entry("socket", dir.resolve("run/sock/m.sock").toString()), Map.entry("httpPort", "0"),
                Map.entry("readyFile", ready.toString())));
        int previous = (int) UMASK.invokeExact(0);
        ManagerDaemon daemon;
        try {
            daemon = switch (ManagerDaemon.start(config)) {
                case ManagerDaemon.Startup.Started s -> s.daemon();
                case ManagerDaemon.Startup.Locked l -> throw new AssertionError("locked: " + l);
            };
            daemon.announceReady(new PrintWriter(new StringWriter()));
        } finally {
            int ignored = (int) UMASK.invokeExact(previous);
        }
        try {
            assertThat(list(dram, ".arena")).as("arenas are memfds").isEmpty();
            List<Path> extents = list(ssd, ".dat");
            assertThat(extents).hasSize(2);
            for (Path p : Stream.of(extents, List.of(ready, ssd.resolve(ManagerConfig.LOCK_FILE),
                    dram.resolve("t.lock"))).flatMap(List::stream).toList()) {
                assertThat(mode(p)).as(p.toString()).isEqualTo("rw-------");
            }
            for (Path d : List.of(dram, dram.getParent(), ssd, ssd.getParent(), ready.getParent(), ready.getParent().getParent(),
                    dir.resolve("run/sock"))) {
                assertThat(mode(d)).as(d.toString()).isEqualTo("rwx------");
            }
        } finally {
            daemon.close();
        }
    }

    private static List<Path> list(Path directory, String suffix) throws Exception {
        try (Stream<Path> s = Files.list(directory)) {
            return s.filter(p -> p.getFileName().toString().endsWith(suffix)).sorted().toList();
        }
    }

    private static String mode(Path p) throws Exception {
        return PosixFilePermissions.toString(Files.getPosixFilePermissions(p, LinkOption.NOFOLLOW_LINKS));
    }
}
