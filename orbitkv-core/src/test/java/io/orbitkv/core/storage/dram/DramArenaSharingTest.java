package io.orbitkv.core.storage.dram;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.state.StateKey;
import io.orbitkv.testkit.Environment;
import io.orbitkv.testkit.ProcessTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static io.orbitkv.core.storage.dram.TestImages.hasCanary;
import static io.orbitkv.core.storage.dram.TestImages.key;
import static io.orbitkv.core.storage.dram.TestImages.writeCanary;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Maps the tier's arena files through a second, independent {@link FileChannel} mapping, as an
 * engine adapter in another process (or Python {@code mmap}) would, using only the published
 * {@link ArenaGeometry} and {@link SlotRef}s.
 */
@ProcessTest
class DramArenaSharingTest {

    @TempDir
    Path dir;

    private static MemorySegment mapSeparately(ArenaGeometry.ClassArena arena, Arena owner,
                                               FileChannel.MapMode mode) throws IOException {
        StandardOpenOption[] options = mode == FileChannel.MapMode.READ_ONLY
                ? new StandardOpenOption[] {StandardOpenOption.READ}
                : new StandardOpenOption[] {StandardOpenOption.READ, StandardOpenOption.WRITE};
        try (FileChannel ch = FileChannel.open(Path.of("/proc/self/fd/" + arena.descriptor()), options)) {
            assertThat(ch.size()).isEqualTo(arena.fileBytes());
            return ch.map(mode, 0, arena.fileBytes(), owner);
        }
    }

    @Test
    void aSecondMappingSeesHeadersAndImagesBothWays() throws IOException {
        DramTierConfig config = DramTierConfig.of(dir, "shared",
                List.of(new SizeClass(64 * 1024, 16), new SizeClass(256 * 1024, 8)));
        try (DramTier tier = DramTier.open(config, new ResidencyStream(64), new SimpleMeterRegistry());
             Arena client = Arena.ofConfined()) {
            ArenaGeometry geometry = tier.arenasFor(3).orElseThrow();
            assertThat(geometry.arenas()).hasSize(2);
            assertThat(Files.readSymbolicLink(Path.of("/proc/self/fd/" + geometry.arenas().get(1).descriptor())).toString())
                    .as("a memfd, on no file system").startsWith("/memfd:");

            MemorySegment[] views = new MemorySegment[2];
            for (ArenaGeometry.ClassArena arena : geometry.arenas()) {
                views[arena.classIndex()] = mapSeparately(arena, client, FileChannel.MapMode.READ_WRITE);
                DramArenaLayout.Header h = DramArenaLayout.readHeader(views[arena.classIndex()]);
                assertThat(h.valid()).isTrue();
                assertThat(h).isEqualTo(new DramArenaLayout.Header(DramArenaLayout.MAGIC, DramArenaLayout.VERSION,
                        arena.classIndex(), arena.slotBytes(), arena.slotCount(), arena.firstSlotOffset(),
                        arena.fileBytes(), geometry.incarnation()));
            }

            // Manager-side write, client-side read at the leased SlotRef.
            StateKey written = key(1);
            Reservation r = (Reservation) tier.reserve(written, 3, 100_000);
            writeCanary(r.segment(), written);
            tier.commit(r);
            try (Lease lease = (Lease) tier.acquire(written, 3)) {
                SlotRef ref = lease.slotRef();
                assertThat(ref.classIndex()).isEqualTo(1);
                MemorySegment seen = views[ref.classIndex()].asSlice(ref.offsetBytes(), ref.lengthBytes());
                assertThat(hasCanary(seen, written)).isTrue();
            }

            // Client-side write into a reserved slot (the publish path), Manager-side read.
            StateKey published = key(2);
            Reservation slot = (Reservation) tier.reserve(published, 3, 5_000);
            SlotRef target = slot.slotRef();
            writeCanary(views[target.classIndex()].asSlice(target.offsetBytes(), target.lengthBytes()), published);
            tier.commit(slot);
            try (Lease lease = (Lease) tier.acquire(published, 3)) {
                assertThat(hasCanary(lease.segment(), published)).isTrue();
                assertThat(lease.segment().address() % DramArenaLayout.PAGE_BYTES).isZero();
            }
        }
    }

    /**
     * A real second process: Python's {@code mmap} + {@code struct}, as the stdlib client will do,
     * reads the header and a leased image, and writes an image into a reserved slot.
     */
    @Test
    void anotherProcessMapsTheArenaWithPythonMmap() throws Exception {
        Environment.require(pythonAvailable(), "python3 on PATH");
        DramTierConfig config = DramTierConfig.of(dir, "py", List.of(new SizeClass(64 * 1024, 8)));
        try (DramTier tier = DramTier.open(config, new ResidencyStream(64), new SimpleMeterRegistry())) {
            ArenaGeometry.ClassArena arena = tier.arenasFor(1).orElseThrow().arenas().getFirst();
            StateKey leasedKey = key(1);
            Reservation r = (Reservation) tier.reserve(leasedKey, 1, 50_000);
            writeCanary(r.segment(), leasedKey);
            tier.commit(r);
            Reservation forPython = (Reservation) tier.reserve(key(2), 1, 30_000);

            try (Lease lease = (Lease) tier.acquire(leasedKey, 1)) {
                String script = """
                        import mmap, struct, sys, hashlib
                        path, read_off, read_len, write_off, write_len = sys.argv[1], *map(int, sys.argv[2:6])
                        with open(path, "r+b") as f:
                            mm = mmap.mmap(f.fileno(), 0)
                            magic, version, cls, slot_bytes, slot_count, first, file_bytes, inc = struct.unpack_from("<QIIIIQQQ", mm, 0)
                            print(magic, version, cls, slot_bytes, slot_count, first, file_bytes, inc)
                            print(hashlib.sha256(mm[read_off:read_off + read_len]).hexdigest())
                            mm[write_off:write_off + write_len] = bytes((i * 7 + 3) % 251 for i in range(write_len))
                            mm.flush()
                            mm.close()
                        """;
                Process p = new ProcessBuilder("python3", "-c", script,
                        // another process of the same user reaches the tier's memfd by number here: this test
                        // JVM is no Manager daemon (which is made undumpable, and passes descriptors instead)
                        "/proc/" + ProcessHandle.current().pid() + "/fd/" + arena.descriptor(),
                        Long.toString(lease.slotRef().offsetBytes()), Integer.toString(lease.lengthBytes()),
                        Long.toString(forPython.slotRef().offsetBytes()), Integer.toString(forPython.lengthBytes()))
                        .redirectErrorStream(true).start();
                List<String> out;
                try (var reader = p.inputReader()) {
                    out = reader.lines().toList();
                }
                assertThat(p.waitFor(30, TimeUnit.SECONDS)).isTrue();
                assertThat(p.exitValue()).as("python output %s", out).isZero();

                assertThat(out.get(0)).isEqualTo(DramArenaLayout.MAGIC + " " + DramArenaLayout.VERSION + " 0 "
                        + arena.slotBytes() + " " + arena.slotCount() + " " + arena.firstSlotOffset() + " "
                        + arena.fileBytes() + " " + tier.arenasFor(1).orElseThrow().incarnation());
                byte[] leased = lease.segment().toArray(ValueLayout.JAVA_BYTE);
                assertThat(out.get(1)).isEqualTo(HexFormat.of().formatHex(
                        MessageDigest.getInstance("SHA-256").digest(leased)));
            }

            tier.commit(forPython);
            try (Lease written = (Lease) tier.acquire(key(2), 1)) {
                for (int i = 0; i < written.lengthBytes(); i++) {
                    assertThat(written.segment().get(ValueLayout.JAVA_BYTE, i)).isEqualTo((byte) ((i * 7 + 3) % 251));
                }
            }
        }
    }

    private static boolean pythonAvailable() {
        try {
            Process p = new ProcessBuilder("python3", "-c", "pass").start();
            return p.waitFor(30, TimeUnit.SECONDS) && p.exitValue() == 0;
        } catch (IOException | InterruptedException e) {
            return false;
        }
    }

    @Test
    void slotsAreFourKibAlignedInFileAndMemory() throws IOException {
        DramTierConfig config = DramTierConfig.of(dir, "align",
                List.of(new SizeClass(4096, 8), new SizeClass(12 * 1024, 8)));
        try (DramTier tier = DramTier.open(config, new ResidencyStream(64), new SimpleMeterRegistry())) {
            for (int i = 0; i < 8; i++) {
                Reservation small = (Reservation) tier.reserve(key(i), 1, 1 + i * 100);
                Reservation large = (Reservation) tier.reserve(key(100 + i), 1, 4097 + i * 100);
                for (Reservation r : List.of(small, large)) {
                    assertThat(r.slotRef().offsetBytes() % 4096).isZero();
                    assertThat(r.segment().address() % 4096).isZero();
                    ArenaGeometry.ClassArena arena = tier.geometry().arenas().get(r.slotRef().classIndex());
                    long slotInClass = (r.slotRef().offsetBytes() - arena.firstSlotOffset()) / arena.slotBytes();
                    assertThat(arena.slotOffset((int) slotInClass)).isEqualTo(r.slotRef().offsetBytes());
                }
                tier.abort(small);
                tier.abort(large);
            }
        }
    }
}
