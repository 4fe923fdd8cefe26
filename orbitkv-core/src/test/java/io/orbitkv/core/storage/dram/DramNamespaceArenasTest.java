package io.orbitkv.core.storage.dram;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.state.StateKey;
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
import java.util.List;

import static io.orbitkv.core.storage.dram.TestImages.key;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Each namespace's pages live in its own memfds: another namespace's mapping holds zeros where
 * they are; a slot that changes namespace frees its old owner's pages (allocated blocks, not
 * sizes); the number of namespaces with arenas is bounded; nothing is created on a file system.
 */
class DramNamespaceArenasTest {

    private static final int SLOT = 64 * 1024;
    private static final int A = 1;
    private static final int B = 2;

    @TempDir
    Path dir;

    private DramTier open(int slots, int maxNamespaces, SimpleMeterRegistry registry) throws IOException {
        DramTierConfig config = new DramTierConfig(dir, "ns", List.of(new SizeClass(SLOT, slots)), SLOT, 0,
                DramTierConfig.DEFAULT_PRESSURE_SCAN_ENTRIES, DramEviction.LRU, maxNamespaces);
        return DramTier.open(config, new ResidencyStream(64), registry);
    }

    private static MemorySegment map(ArenaGeometry geometry, Arena arena) throws IOException {
        ArenaGeometry.ClassArena a = geometry.arenas().getFirst();
        try (FileChannel ch = FileChannel.open(Path.of("/proc/self/fd/" + a.descriptor()), StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            return ch.map(FileChannel.MapMode.READ_WRITE, 0, a.fileBytes(), arena);
        }
    }

    private static Reservation publish(DramTier tier, StateKey key, int namespace, byte fill) {
        Reservation r = (Reservation) tier.reserve(key, namespace, SLOT);
        r.segment().fill(fill);
        assertThat(tier.commit(r)).isInstanceOf(CommitResult.Inserted.class);
        return r;
    }

    @Test
    void aNamespacesMappingHoldsZerosWhereAnotherNamespacesPagesAre() throws IOException {
        try (DramTier tier = open(8, 4, new SimpleMeterRegistry()); Arena client = Arena.ofConfined()) {
            Reservation ofB = publish(tier, key(1), B, (byte) 0x5B);
            Reservation ofA = publish(tier, key(2), A, (byte) 0x5A);
            ArenaGeometry geometryA = tier.arenasFor(A).orElseThrow();
            ArenaGeometry geometryB = tier.arenasFor(B).orElseThrow();
            assertThat(geometryA.arenas().getFirst().descriptor()).as("another descriptor")
                    .isNotEqualTo(geometryB.arenas().getFirst().descriptor());
            MemorySegment seenByA = map(geometryA, client);
            MemorySegment seenByB = map(geometryB, client);
            long atB = ofB.slotRef().offsetBytes();
            long atA = ofA.slotRef().offsetBytes();
            assertThat(seenByA.asSlice(atB, SLOT).toArray(ValueLayout.JAVA_BYTE)).as("B's page, mapped by A")
                    .containsOnly((byte) 0);
            assertThat(seenByB.asSlice(atA, SLOT).toArray(ValueLayout.JAVA_BYTE)).as("A's page, mapped by B")
                    .containsOnly((byte) 0);
            assertThat(seenByA.asSlice(atA, SLOT).toArray(ValueLayout.JAVA_BYTE)).containsOnly((byte) 0x5A);
            assertThat(seenByB.asSlice(atB, SLOT).toArray(ValueLayout.JAVA_BYTE)).containsOnly((byte) 0x5B);
            try (Lease lease = (Lease) tier.acquire(key(1), B)) {
                assertThat(lease.segment().get(ValueLayout.JAVA_BYTE, 0)).as("the Manager reads B's own memfd")
                        .isEqualTo((byte) 0x5B);
            }
        }
    }

    @Test
    void aSlotThatChangesNamespaceFreesItsOldOwnersPages() throws IOException {
        try (DramTier tier = open(2, 4, new SimpleMeterRegistry())) {
            publish(tier, key(1), A, (byte) 1);
            publish(tier, key(2), A, (byte) 1);
            long header = DramArenaLayout.PAGE_BYTES;
            assertThat(tier.allocatedBytes(A)).isEqualTo(header + 2L * SLOT);
            tier.evict(key(1)); // either may have left the index already (its LRU bound is 3/4 of the slots)
            tier.evict(key(2));
            assertThat(tier.contains(key(1)) || tier.contains(key(2))).isFalse();
            publish(tier, key(3), B, (byte) 2);
            publish(tier, key(4), B, (byte) 2);
            assertThat(tier.allocatedBytes(A)).as("A's copies of both slots were punched out").isEqualTo(header);
            assertThat(tier.allocatedBytes(B)).isEqualTo(header + 2L * SLOT);
        }
    }

    @Test
    void residentBytesCountEachNamespacesImagesOnly() throws IOException {
        try (DramTier tier = open(8, 4, new SimpleMeterRegistry())) {
            publish(tier, key(1), A, (byte) 1);
            publish(tier, key(2), A, (byte) 1);
            assertThat(tier.residentBytes(A)).isEqualTo(2L * SLOT);
            assertThat(tier.residentBytes(B)).as("nothing of B's yet").isZero();
            publish(tier, key(1), B, (byte) 2);
            assertThat(tier.residentBytes(B)).as("B's own image of the same key bytes").isEqualTo(SLOT);
            assertThat(tier.residentBytes(A)).as("A's images unchanged by B's publish").isEqualTo(2L * SLOT);
            assertThat(tier.residentBytes(A) + tier.residentBytes(B)).isEqualTo(tier.usage().usedBytes());
            assertThat(tier.evictNamespace(A)).isEqualTo(2);
            assertThat(tier.residentBytes(A)).as("A's images evicted").isZero();
            assertThat(tier.residentBytes(B)).isEqualTo(SLOT);
        }
    }

    @Test
    void namespacesWithArenasAreBoundedAndCounted() throws IOException {
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        try (DramTier tier = open(8, 2, registry)) {
            publish(tier, key(1), A, (byte) 1);
            publish(tier, key(2), B, (byte) 2);
            assertThat(tier.reserve(key(3), 3, SLOT)).as("a third namespace")
                    .isEqualTo(new ReserveResult.Full(ReserveResult.FullReason.ARENA_NAMESPACES));
            assertThat(tier.arenasFor(3)).isEmpty();
            assertThat(tier.arenasFor(A)).isPresent();
            assertThat(registry.get("orbitkv.dram.arena.namespaces").gauge().value()).isEqualTo(2.0);
            assertThat(registry.get("orbitkv.dram.reservations.failed").tag("reason", "arena_namespaces").counter()
                    .count()).isEqualTo(1.0);
            try (var files = Files.list(dir)) {
                assertThat(files.toList()).as("no arena on a file system").isEmpty();
            }
        }
    }

    @Test
    void idsOnEitherSideOfTheDenseTableFindTheirOwnMemfdAndCountTowardsTheBound() throws IOException {
        int small = 0;
        int edge = DramArenas.DENSE_IDS - 1;
        int large = DramArenas.DENSE_IDS + 5;
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        try (DramTier tier = open(8, 3, registry); Arena client = Arena.ofConfined()) {
            int[] namespaces = {large, small, edge};
            for (int i = 0; i < namespaces.length; i++) publish(tier, key(10 + i), namespaces[i], (byte) (0x30 + i));
            for (int i = 0; i < namespaces.length; i++) {
                try (Lease lease = (Lease) tier.acquire(key(10 + i), namespaces[i])) {
                    assertThat(lease.namespaceId()).isEqualTo(namespaces[i]);
                    assertThat(lease.segment().toArray(ValueLayout.JAVA_BYTE)).as("namespace %d", namespaces[i])
                            .containsOnly((byte) (0x30 + i));
                    MemorySegment own = map(tier.arenasFor(namespaces[i]).orElseThrow(), client);
                    assertThat(own.get(ValueLayout.JAVA_BYTE, lease.slotRef().offsetBytes())).as("its own memfd")
                            .isEqualTo((byte) (0x30 + i));
                }
            }
            assertThat(tier.reserve(key(20), 7, SLOT)).as("a fourth namespace, below the dense bound")
                    .isEqualTo(new ReserveResult.Full(ReserveResult.FullReason.ARENA_NAMESPACES));
            assertThat(tier.reserve(key(21), DramArenas.DENSE_IDS * 4, SLOT)).as("a fourth namespace, above it")
                    .isEqualTo(new ReserveResult.Full(ReserveResult.FullReason.ARENA_NAMESPACES));
            ReserveResult again = tier.reserve(key(22), edge, SLOT);
            assertThat(again).as("a namespace that has arenas").isInstanceOf(Reservation.class);
            assertThat(tier.abort((Reservation) again)).isTrue();
        }
    }
}
