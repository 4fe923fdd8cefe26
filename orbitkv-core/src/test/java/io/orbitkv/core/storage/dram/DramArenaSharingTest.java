package io.orbitkv.core.storage.dram;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.storage.ResidencyStream;
import io.orbitkv.state.StateKey;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;

import static io.orbitkv.core.storage.dram.TestImages.hasCanary;
import static io.orbitkv.core.storage.dram.TestImages.key;
import static io.orbitkv.core.storage.dram.TestImages.writeCanary;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Maps the tier's arena files through a second, independent {@link FileChannel} mapping, as an
 * engine adapter in another process (or Python {@code mmap}) would, using only the published
 * {@link ArenaGeometry} and {@link SlotRef}s.
 */
class DramArenaSharingTest {

    @TempDir
    Path dir;

    private static MemorySegment mapSeparately(ArenaGeometry.ClassArena arena, Arena owner,
                                               FileChannel.MapMode mode) throws IOException {
        StandardOpenOption[] options = mode == FileChannel.MapMode.READ_ONLY
                ? new StandardOpenOption[] {StandardOpenOption.READ}
                : new StandardOpenOption[] {StandardOpenOption.READ, StandardOpenOption.WRITE};
        try (FileChannel ch = FileChannel.open(Path.of(arena.path()), options)) {
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
            ArenaGeometry geometry = tier.geometry();
            assertThat(geometry.arenas()).hasSize(2);
            assertThat(geometry.arenas().get(1).path())
                    .isEqualTo(dir.resolve("shared.c1-256k.arena").toAbsolutePath().toString());

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
            try (Lease lease = (Lease) tier.acquire(written)) {
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
            try (Lease lease = (Lease) tier.acquire(published)) {
                assertThat(hasCanary(lease.segment(), published)).isTrue();
                assertThat(lease.segment().address() % DramArenaLayout.PAGE_BYTES).isZero();
            }
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
