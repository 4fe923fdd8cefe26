package io.orbitkv.core.storage.dram;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.state.StateKey;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.io.IOException;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static io.orbitkv.core.storage.dram.TestImages.hasCanary;
import static io.orbitkv.core.storage.dram.TestImages.key;
import static io.orbitkv.core.storage.dram.TestImages.writeCanary;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.tuple;

class DramTierTest {

    private static final int K4 = 4096;
    private static final int K16 = 16 * 1024;

    @TempDir
    Path dir;

    private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
    private final ResidencyStream stream = new ResidencyStream(1024);
    private DramTier tier;

    @AfterEach
    void closeTier() {
        if (tier != null) tier.close();
    }

    private DramTier open(List<SizeClass> classes, long reservedBudget, long evictedLeasedBudget) throws IOException {
        tier = DramTier.open(new DramTierConfig(dir, "test", classes, reservedBudget, evictedLeasedBudget, 64),
                stream, registry);
        return tier;
    }

    /** 8 slots of 4 KiB and 4 of 16 KiB (96 KiB); generous reservation budget, 16 KiB evicted-leased. */
    private DramTier openSmall() throws IOException {
        return open(List.of(new SizeClass(K4, 8), new SizeClass(K16, 4)), 32 * 1024, K16);
    }

    private Reservation reserve(StateKey key, int lengthBytes) {
        ReserveResult r = tier.reserve(key, 7, lengthBytes);
        assertThat(r).isInstanceOf(Reservation.class);
        return (Reservation) r;
    }

    private long publish(StateKey key, int lengthBytes) {
        Reservation r = reserve(key, lengthBytes);
        writeCanary(r.segment(), key);
        CommitResult c = tier.commit(r);
        assertThat(c).isInstanceOf(CommitResult.Inserted.class);
        return ((CommitResult.Inserted) c).imageId();
    }

    private Lease lease(StateKey key) {
        AcquireResult a = tier.acquire(key, 7);
        assertThat(a).isInstanceOf(Lease.class);
        return (Lease) a;
    }

    private double counter(String name, String... tags) {
        // a counter's or a function counter's one measurement (hits, inserts and evictions are function counters)
        return registry.get(name).tags(tags).meter().measure().iterator().next().getValue();
    }

    private double gauge(String name) {
        return registry.get(name).gauge().value();
    }

    @Test
    void publishedBytesAreReadThroughALease() throws IOException {
        openSmall();
        StateKey k = key(1);
        long imageId = publish(k, 10_000);

        try (Lease lease = lease(k)) {
            assertThat(lease.imageId()).isEqualTo(imageId);
            assertThat(lease.lengthBytes()).isEqualTo(10_000);
            assertThat(lease.segment().byteSize()).isEqualTo(10_000);
            assertThat(hasCanary(lease.segment(), k)).isTrue();
            assertThat(lease.segment().isReadOnly()).isTrue();
            assertThatThrownBy(() -> lease.segment().set(ValueLayout.JAVA_BYTE, 0, (byte) 1))
                    .isInstanceOf(IllegalArgumentException.class);
        }
        assertThat(tier.acquire(key(2), 7)).isEqualTo(new AcquireResult.Miss(key(2)));
        assertThat(counter("orbitkv.dram.hits")).isEqualTo(1);
        assertThat(counter("orbitkv.dram.misses")).isEqualTo(1);
        assertThat(counter("orbitkv.dram.inserts")).isEqualTo(1);
    }

    @Test
    void twoNamespacesImagesOfOneKeyCoexistAndAreEvictedIndependently() throws IOException {
        openSmall();
        StateKey k = key(1);
        long seven = publish(k, K4); // namespace 7
        long usedBySeven = tier.usage().usedBytes();
        assertThat(tier.reserve(k, 7, K4)).as("own namespace").isInstanceOf(ReserveResult.AlreadyResident.class);
        ReserveResult other = tier.reserve(k, 8, K4);
        assertThat(other).as("another namespace's image of the key bytes").isInstanceOf(Reservation.class);
        assertThat(tier.contains(k, 8)).isFalse();
        assertThat(tier.acquire(k, 8)).as("namespace 8 cannot lease 7's image").isInstanceOf(AcquireResult.Miss.class);
        assertThat(tier.acquireImage(k, 8, seven)).isInstanceOf(AcquireResult.Miss.class);
        assertThat(tier.commit((Reservation) other)).isInstanceOf(CommitResult.Inserted.class);

        // Both are resident, each in its own slot; nothing was displaced.
        assertThat(tier.contains(k, 7)).isTrue();
        assertThat(tier.contains(k, 8)).isTrue();
        assertThat(tier.usage().usedBytes()).as("8's image adds its own slot").isEqualTo(2 * usedBySeven);
        assertThat(counter("orbitkv.dram.evictions", "cause", "displaced")).isZero();
        try (Lease a = lease(k); Lease b = (Lease) tier.acquire(k, 8)) {
            assertThat(a.namespaceId()).isEqualTo(7);
            assertThat(a.imageId()).isEqualTo(seven);
            assertThat(b.namespaceId()).isEqualTo(8);
            assertThat(b.slot()).isNotEqualTo(a.slot());
        }
        assertThat(stream.readFrom(1, 16).events()).extracting(ResidencyEvent::kind).containsExactly(
                ResidencyEvent.Kind.ADDED, ResidencyEvent.Kind.ADDED);
        assertThat(tier.residentKeys()).as("one entry per image").containsExactly(k, k);

        // Evicting one namespace's image leaves the other's.
        assertThat(tier.evict(k, 8)).isTrue();
        assertThat(tier.contains(k, 8)).isFalse();
        assertThat(tier.contains(k, 7)).isTrue();
        assertThat(tier.usage().usedBytes()).isEqualTo(usedBySeven);
        assertThat(tier.evictNamespace(8)).isZero();

        // commitAndAcquire (staging, peer reads) adds beside the other namespace's image the same way.
        AcquireResult leased = tier.commitAndAcquire((Reservation) tier.reserve(k, 8, K4));
        assertThat(leased).isInstanceOf(Lease.class);
        assertThat(((Lease) leased).namespaceId()).isEqualTo(8);
        ((Lease) leased).release();
        assertThat(tier.evictNamespace(7)).isEqualTo(1);
        assertThat(tier.contains(k, 8)).as("a namespace drop keeps the other's image").isTrue();
        assertThat(counter("orbitkv.dram.evictions", "cause", "displaced")).isZero();
    }

    @Test
    void anImageTakesTheSmallestClassThatHoldsIt() throws IOException {
        openSmall();
        assertThat(reserve(key(1), 1).slotRef().classIndex()).isZero();
        assertThat(reserve(key(2), K4).slotRef().classIndex()).isZero();
        Reservation big = reserve(key(3), K4 + 1);
        assertThat(big.slotRef().classIndex()).isEqualTo(1);
        assertThat(big.slotRef().offsetBytes() % DramArenaLayout.PAGE_BYTES).isZero();
        assertThat(tier.reserve(key(4), 7, K16 + 1))
                .isEqualTo(new ReserveResult.Full(ReserveResult.FullReason.NO_SIZE_CLASS));
        assertThat(counter("orbitkv.dram.reservations.failed", "reason", "no_size_class")).isEqualTo(1);
        assertThat(counter("orbitkv.dram.reservations.undersized"))
                .as("4 KiB + 1 (two 4 KiB blocks) in a 16 KiB slot; not 1 byte in a 4 KiB slot (no class is smaller)")
                .isEqualTo(1);
        assertThat(tier.usage().reservedBytes()).isEqualTo(K4 + K4 + K16);
    }

    @Test
    void firstCommitWinsAndTheLoserSlotIsFreed() throws IOException {
        openSmall();
        StateKey k = key(1);
        Reservation first = reserve(k, 100);
        Reservation second = reserve(k, 100);
        writeCanary(first.segment(), k);
        second.segment().fill((byte) 0x5A);

        CommitResult won = tier.commit(first);
        CommitResult lost = tier.commit(second);

        assertThat(won).isEqualTo(new CommitResult.Inserted(first.imageId()));
        assertThat(lost).isEqualTo(new CommitResult.Duplicate(first.imageId()));
        assertThat(tier.usage().usedBytes()).isEqualTo(K4);
        assertThat(tier.usage().reservedBytes()).isZero();
        assertThat(tier.usage().freeBytes()).isEqualTo(tier.usage().capacityBytes() - K4);
        try (Lease lease = lease(k)) {
            assertThat(hasCanary(lease.segment(), k)).isTrue();
        }
        assertThat(tier.reserve(k, 7, 100)).isEqualTo(new ReserveResult.AlreadyResident(first.imageId()));
        assertThat(counter("orbitkv.dram.commits.duplicate")).isEqualTo(1);
    }

    @Test
    void aReservationClosesExactlyOnce() throws IOException {
        openSmall();
        Reservation committed = reserve(key(1), 100);
        Reservation aborted = reserve(key(2), 100);

        assertThat(tier.commit(committed)).isInstanceOf(CommitResult.Inserted.class);
        assertThat(tier.commit(committed)).isEqualTo(new CommitResult.NotOpen());
        assertThat(tier.abort(committed)).isFalse();
        assertThat(tier.abort(aborted)).isTrue();
        assertThat(tier.abort(aborted)).isFalse();
        assertThat(tier.commit(aborted)).isEqualTo(new CommitResult.NotOpen());

        assertThat(tier.contains(key(1))).isTrue();
        assertThat(tier.contains(key(2))).isFalse();
        DramUsage u = tier.usage();
        assertThat(u.usedBytes()).isEqualTo(K4);
        assertThat(u.reservedBytes()).isZero();
        assertThat(u.freeBytes()).isEqualTo(u.capacityBytes() - K4);
    }

    @Test
    void doubleReleaseIsANoOpAndDoesNotUnpinOtherLeases() throws IOException {
        openSmall();
        StateKey k = key(1);
        publish(k, 100);
        Lease a = lease(k);
        Lease b = lease(k);
        assertThat(tier.usage().leases()).isEqualTo(2);

        assertThat(a.release()).isEqualTo(ReleaseResult.RELEASED);
        assertThat(a.release()).isEqualTo(ReleaseResult.ALREADY_RELEASED);
        a.close();
        assertThat(tier.usage().leases()).isEqualTo(1);
        assertThat(tier.usage().leasedBytes()).isEqualTo(K4);

        // b still pins the slot: evicting must park it, not free it.
        assertThat(tier.evict(k)).isTrue();
        assertThat(tier.usage().evictedLeasedBytes()).isEqualTo(K4);
        assertThat(b.isHeld()).isTrue();
        assertThat(b.release()).isEqualTo(ReleaseResult.RELEASED);
        assertThat(tier.usage().evictedLeasedBytes()).isZero();
        assertThat(tier.usage().freeBytes()).isEqualTo(tier.usage().capacityBytes());
    }

    @Test
    void anEvictedImageKeepsItsSlotUntilTheLastLeaseEnds() throws IOException {
        openSmall();
        StateKey victim = key(1);
        publish(victim, K4);
        Lease held = lease(victim);

        assertThat(tier.evict(victim)).isTrue();
        assertThat(tier.evict(victim)).isFalse();
        assertThat(tier.acquire(victim, 7)).isInstanceOf(AcquireResult.Miss.class);

        // Fill every other 4 KiB slot: none of them may be the leased one.
        List<Reservation> others = new ArrayList<>();
        for (int i = 0; i < 7; i++) {
            Reservation r = reserve(key(100 + i), K4);
            assertThat(r.slotRef()).isNotEqualTo(held.slotRef());
            writeCanary(r.segment(), key(100 + i));
            others.add(r);
        }
        assertThat(hasCanary(held.segment(), victim)).isTrue();
        assertThat(tier.usage().evictedLeasedBytes()).isEqualTo(K4);

        held.release();
        assertThat(tier.usage().evictedLeasedBytes()).isZero();
        Reservation reused = reserve(key(200), K4);
        assertThat(reused.slotRef().offsetBytes()).isEqualTo(held.slotRef().offsetBytes());
        others.forEach(tier::abort);
        tier.abort(reused);
        assertThat(counter("orbitkv.dram.evictions", "cause", "explicit")).isEqualTo(1);
        assertThat(counter("orbitkv.dram.evictions", "cause", "policy")).isZero();
    }

    @Test
    void reservationsFailWhenEvictedButLeasedBytesExceedTheirBudget() throws IOException {
        openSmall(); // evicted-leased budget: 16 KiB
        List<Lease> leases = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            publish(key(i), K4);
            leases.add(lease(key(i)));
            tier.evict(key(i));
        }
        assertThat(tier.usage().evictedLeasedBytes()).isEqualTo(5L * K4);
        assertThat(tier.reserve(key(50), 7, 10))
                .isEqualTo(new ReserveResult.Full(ReserveResult.FullReason.EVICTED_LEASED_BUDGET));
        assertThat(counter("orbitkv.dram.reservations.failed", "reason", "evicted_leased_budget")).isEqualTo(1);

        leases.getFirst().release();
        assertThat(tier.usage().evictedLeasedBytes()).isEqualTo(4L * K4);
        assertThat(tier.reserve(key(50), 7, 10)).isInstanceOf(Reservation.class);
    }

    @Test
    void reservationsFailBeyondTheReservedBudget() throws IOException {
        open(List.of(new SizeClass(K4, 8), new SizeClass(K16, 4)), K16 + K4, K4);
        Reservation big = reserve(key(1), K16);
        Reservation small = reserve(key(2), K4);
        assertThat(tier.reserve(key(3), 7, K4))
                .isEqualTo(new ReserveResult.Full(ReserveResult.FullReason.RESERVED_BUDGET));
        tier.commit(big);
        assertThat(tier.reserve(key(3), 7, K4)).isInstanceOf(Reservation.class);
        tier.abort(small);
    }

    @Test
    void weightPressureEvictsThroughCaffeineAndFreesSlots() throws IOException {
        // 64 slots of 4 KiB = 256 KiB; budgets 16 + 16 KiB leave Caffeine 224 KiB = 56 images.
        open(List.of(new SizeClass(K4, 64)), 4L * K4, 4L * K4);
        for (int i = 0; i < 200; i++) {
            ReserveResult r = tier.reserve(key(i), 7, K4);
            assertThat(r).as("reserve %d", i).isInstanceOf(Reservation.class);
            tier.commit((Reservation) r);
            tier.runMaintenance();
            assertThat(tier.usage().usedBytes()).isLessThanOrEqualTo(tier.config().indexWeightBytes());
        }
        DramUsage u = tier.usage();
        assertThat(u.usedBytes()).isEqualTo(tier.config().indexWeightBytes());
        assertThat(u.residentImages()).isEqualTo(56);
        assertThat(u.freeBytes()).isEqualTo(u.capacityBytes() - u.usedBytes());
        double evictions = counter("orbitkv.dram.evictions", "cause", "policy");
        assertThat(evictions).isEqualTo(200 - 56);
        assertThat(counter("orbitkv.dram.evictions", "cause", "class_pressure")).isZero();

        List<ResidencyEvent> events = stream.readFrom(1, 1000).events();
        assertThat(events).hasSize(200 + (200 - 56));
        assertThat(events.stream().filter(e -> e.kind() == ResidencyEvent.Kind.REMOVED)).hasSize(200 - 56);
        long resident = 0;
        for (int i = 0; i < 200; i++) {
            if (tier.contains(key(i))) resident++;
        }
        assertThat(resident).isEqualTo(56);
    }

    @Test
    void aFrequentlyReadImageSurvivesAScanOfOneOffImages() throws IOException {
        // Index holds 56 images. The hot image is read a few times once the index is half full (when
        // Caffeine starts counting frequencies), then every 80 inserts: an LRU would have flushed it
        // before each of those reads; W-TinyLFU keeps it because one-off images lose the frequency
        // comparison at admission.
        open(List.of(new SizeClass(K4, 64)), 4L * K4, 4L * K4);
        StateKey hot = key(-1);
        publish(hot, K4);
        for (int i = 0; i < 800; i++) {
            if (i % 80 == 0 || (i >= 30 && i < 35)) {
                AcquireResult read = tier.acquire(hot, 7);
                assertThat(read).as("hot image resident at step %d", i).isInstanceOf(Lease.class);
                ((Lease) read).release();
            }
            ReserveResult r = tier.reserve(key(i), 7, K4);
            assertThat(r).isInstanceOf(Reservation.class);
            tier.commit((Reservation) r);
            tier.runMaintenance();
        }
        assertThat(tier.contains(hot)).isTrue();
        assertThat(tier.usage().leases()).isZero();
    }

    @Test
    void aDryClassFindsAVictimBehindMoreColdImagesOfAnotherClassThanTheScanBound() throws IOException {
        // The workload moves from 4 KiB to 16 KiB images: 100 old 4 KiB images (more than the 64
        // entries the coldest-first scan looks at) sit colder than every 16 KiB one, and the total
        // weight (400 + 128 KiB) stays far below Caffeine's bound, so only class pressure can free
        // a 16 KiB slot. Each 16 KiB publish must still find a victim in its own class.
        open(List.of(new SizeClass(K4, 128), new SizeClass(K16, 8)), K16, K16);
        for (int i = 0; i < 100; i++) publish(key(i), K4);
        for (int i = 1000; i < 1040; i++) {
            ReserveResult r = tier.reserve(key(i), 7, K16);
            assertThat(r).as("16 KiB publish %d with %d of %d bytes free", i - 1000, tier.usage().freeBytes(),
                    tier.usage().capacityBytes()).isInstanceOf(Reservation.class);
            writeCanary(((Reservation) r).segment(), key(i));
            assertThat(tier.commit((Reservation) r)).isInstanceOf(CommitResult.Inserted.class);
        }
        assertThat(tier.usage().residentImages()).isEqualTo(100 + 8);
        assertThat(counter("orbitkv.dram.evictions", "cause", "class_pressure")).isEqualTo(40 - 8);
        for (int i = 0; i < 100; i++) assertThat(tier.contains(key(i))).as("4 KiB image %d kept", i).isTrue();
        assertThat(tier.contains(key(1039))).as("the image just published").isTrue();
        int resident16 = 0;
        for (int i = 1000; i < 1040; i++) {
            if (tier.acquire(key(i), 7) instanceof Lease l) {
                assertThat(hasCanary(l.segment(), key(i))).as("16 KiB image %d", i - 1000).isTrue();
                l.release();
                resident16++;
            }
        }
        assertThat(resident16).isEqualTo(8);
    }

    @Test
    void aDryClassEvictsItsColdestUnleasedImage() throws IOException {
        // Class 0 has 4 slots, class 1 has 16: Caffeine's total weight never binds for class 0 alone.
        open(List.of(new SizeClass(K4, 4), new SizeClass(K16, 16)), K16, K16);
        for (int i = 0; i < 4; i++) publish(key(i), K4);
        Lease pinned = lease(key(0));

        long imageId = publish(key(10), K4);

        assertThat(tier.contains(key(10))).isTrue();
        assertThat(tier.contains(key(0))).as("leased image is not a pressure victim").isTrue();
        assertThat(tier.usage().residentImages()).isEqualTo(4);
        assertThat(tier.usage().evictedLeasedBytes()).isZero();
        assertThat(counter("orbitkv.dram.evictions", "cause", "class_pressure")).isEqualTo(1);
        assertThat(imageId).isPositive();

        // Every class-0 image leased: nothing can be evicted for a new one.
        List<Lease> all = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            if (tier.acquire(key(i), 7) instanceof Lease l) all.add(l);
        }
        all.add(lease(key(10)));
        assertThat(tier.reserve(key(11), 7, K4))
                .isEqualTo(new ReserveResult.Full(ReserveResult.FullReason.NO_FREE_SLOT));
        all.forEach(Lease::release);
        pinned.release();
        assertThat(tier.usage().leases()).isZero();
    }

    @Test
    void everyInsertAndRemovalIsOnTheResidencyStream() throws IOException {
        openSmall();
        long first = publish(key(1), 100);
        long second = publish(key(2), 100);
        tier.evict(key(1));
        long again = publish(key(1), 100);

        List<ResidencyEvent> events = stream.readFrom(1, 100).events();
        assertThat(events).extracting(ResidencyEvent::key, ResidencyEvent::kind, ResidencyEvent::generation,
                        ResidencyEvent::medium)
                .containsExactly(
                        tuple(key(1), ResidencyEvent.Kind.ADDED, first, ResidencyEvent.Medium.DRAM),
                        tuple(key(2), ResidencyEvent.Kind.ADDED, second, ResidencyEvent.Medium.DRAM),
                        tuple(key(1), ResidencyEvent.Kind.REMOVED, first, ResidencyEvent.Medium.DRAM),
                        tuple(key(1), ResidencyEvent.Kind.ADDED, again, ResidencyEvent.Medium.DRAM));
        assertThat(again).isGreaterThan(first);
    }

    @Test
    void namespaceDropRemovesOnlyThatNamespace() throws IOException {
        openSmall();
        for (int i = 0; i < 3; i++) {
            Reservation r = (Reservation) tier.reserve(key(i), 1, 100);
            tier.commit(r);
        }
        Reservation other = (Reservation) tier.reserve(key(9), 2, 100);
        tier.commit(other);

        assertThat(tier.evictNamespace(1)).isEqualTo(3);
        assertThat(tier.contains(key(9))).isTrue();
        assertThat(tier.usage().residentImages()).isEqualTo(1);
        assertThat(counter("orbitkv.dram.evictions", "cause", "namespace")).isEqualTo(3);
    }

    @Test
    void gaugesFollowTheAccounting() throws IOException {
        openSmall();
        publish(key(1), 100);
        Lease lease = lease(key(1));
        Reservation pending = reserve(key(2), K16);

        assertThat(gauge("orbitkv.dram.capacity")).isEqualTo(8 * K4 + 4 * K16);
        assertThat(gauge("orbitkv.dram.used")).isEqualTo(K4);
        assertThat(gauge("orbitkv.dram.reserved")).isEqualTo(K16);
        assertThat(gauge("orbitkv.dram.leased")).isEqualTo(K4);
        assertThat(gauge("orbitkv.dram.free")).isEqualTo(7 * K4 + 3 * K16);
        assertThat(gauge("orbitkv.dram.leases")).isEqualTo(1);
        assertThat(gauge("orbitkv.dram.images.resident")).isEqualTo(1);
        tier.evict(key(1));
        assertThat(gauge("orbitkv.dram.evicted.leased")).isEqualTo(K4);
        assertThat(gauge("orbitkv.dram.used")).isZero();
        lease.release();
        tier.abort(pending);
        assertThat(gauge("orbitkv.dram.free")).isEqualTo(8 * K4 + 4 * K16);
    }

    @Test
    void closeUnmapsUnlinksAndRemovesMeters() throws IOException {
        openSmall();
        publish(key(1), 100);
        Lease lease = lease(key(1));
        Reservation pending = reserve(key(2), 100);
        assertThat(tier.allocatedBytes(7)).as("the namespace's memfds hold its pages").isPositive();

        tier.close();
        tier.close();

        assertThat(tier.allocatedBytes(7)).as("descriptors closed").isZero();
        assertThatThrownBy(() -> lease.segment().get(ValueLayout.JAVA_BYTE, 0)).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> tier.acquire(key(1), 7)).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> tier.reserve(key(3), 1, 10)).isInstanceOf(IllegalStateException.class);
        assertThat(lease.release()).isEqualTo(ReleaseResult.RELEASED);
        assertThat(tier.abort(pending)).isTrue();
        assertThat(registry.find("orbitkv.dram.used").gauge()).isNull();
        tier = null;
    }

    @Test
    void theArenasAreOnNoFileSystem() throws IOException {
        Path stale = DramArenaLayout.fileOf(dir, "test", 0, K4);
        Files.write(stale, new byte[123]);
        openSmall();
        publish(key(1), 100);
        try (var files = Files.list(dir)) {
            assertThat(files.toList()).as("only the leftover of an older version").containsExactly(stale);
        }
        assertThat(Files.size(stale)).as("not reused").isEqualTo(123);
        assertThat(tier.arenasFor(7).orElseThrow().arenas()).allMatch(a -> a.descriptor() >= 0);
    }

    @Test
    void defaultClassesSplitTheCapacityEvenly() {
        List<SizeClass> classes = DramTierConfig.splitEvenly(3L << 30, DramTierConfig.DEFAULT_SLOT_BYTES);
        assertThat(classes).containsExactly(new SizeClass(64 * 1024, 16384), new SizeClass(256 * 1024, 4096),
                new SizeClass(2 * 1024 * 1024, 512));
        DramTierConfig config = DramTierConfig.of(dir, "split", classes);
        assertThat(config.capacityBytes()).isEqualTo(3L << 30);
        assertThat(config.reservedBudgetBytes()).isEqualTo((3L << 30) / 8);
        assertThat(config.indexWeightBytes()).isEqualTo((3L << 30) * 3 / 4);
        assertThatThrownBy(() -> DramTierConfig.splitEvenly(1 << 20, DramTierConfig.DEFAULT_SLOT_BYTES))
                .isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void invalidConfigurationsAreRejected() {
        List<SizeClass> classes = List.of(new SizeClass(K4, 8), new SizeClass(K16, 4));
        assertThatThrownBy(() -> new SizeClass(5000, 1)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new DramTierConfig(dir, "bad/name", classes, K16, 0, 1))
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new DramTierConfig(dir, "t", List.of(classes.get(1), classes.get(0)), K16, 0, 1))
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new DramTierConfig(dir, "t", classes, K4, 0, 1))
                .as("reserved budget below the largest slot").isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new DramTierConfig(dir, "t", classes, 64 * 1024, 32 * 1024, 1))
                .as("budgets covering the whole arena").isInstanceOf(IllegalArgumentException.class);
    }

    @SuppressWarnings("try") // the second tier is open only for its gauges
    @Test
    void twoTiersShareARegistryUnderTheirArenaTags() throws IOException {
        openSmall();
        publish(key(1), 100);
        try (DramTier other = DramTier.open(DramTierConfig.of(dir, "other", List.of(new SizeClass(K4, 8))),
                new ResidencyStream(16), registry)) {
            assertThat(registry.get("orbitkv.dram.used").tag("arena", "test").gauge().value()).isEqualTo(K4);
            assertThat(registry.get("orbitkv.dram.used").tag("arena", "other").gauge().value()).isZero();
        }
        assertThat(registry.find("orbitkv.dram.used").tag("arena", "other").gauge()).isNull();
        assertThat(registry.get("orbitkv.dram.used").tag("arena", "test").gauge().value()).isEqualTo(K4);
    }

    @Test
    void aReservationOfAnotherTierIsRejected() throws IOException {
        openSmall();
        Reservation mine = reserve(key(1), 10);
        try (DramTier other = DramTier.open(DramTierConfig.of(dir, "other", List.of(new SizeClass(K4, 8))),
                new ResidencyStream(16), new SimpleMeterRegistry())) {
            assertThatThrownBy(() -> other.commit(mine)).isInstanceOf(IllegalArgumentException.class);
        }
        assertThat(mine.isOpen()).isTrue();
    }

    /**
     * on-evict with every SSD write still pending: the listener keeps each handed-over image, so
     * its slot stays evicted-but-leased. Class pressure must still free a slot for the
     * reservation (it was refused NO_FREE_SLOT after parking 8 images), and hand-overs stay
     * within the evicted-leased budget.
     */
    @Test
    void classPressureFreesASlotWhileTheListenerKeepsEveryHandedOverImage() throws IOException {
        for (long budget : new long[] {4L * K16, 32L * K16}) {
            open(List.of(new SizeClass(K4, 256), new SizeClass(K16, 64)), 64 * 1024, budget);
            List<Lease> handedOver = new ArrayList<>();
            tier.setEvictionListener((lease, namespaceId) -> handedOver.add(lease));
            for (int i = 0; i < 64 + 16; i++) {
                ReserveResult r = tier.reserve(key(i), 7, K16);
                assertThat(r).as("publish %d, evicted-leased budget %d", i, budget).isInstanceOf(Reservation.class);
                assertThat(tier.commit((Reservation) r)).isInstanceOf(CommitResult.Inserted.class);
                assertThat(tier.usage().evictedLeasedBytes()).isLessThanOrEqualTo(budget);
            }
            assertThat(handedOver).as("hand-overs under budget %d", budget)
                    .hasSize((int) Math.min(budget / K16, 16L * (DramTier.MAX_PRESSURE_EVICTIONS - 1)));
            assertThat(counter("orbitkv.dram.handovers.skipped"))
                    .isEqualTo(counter("orbitkv.dram.evictions", "cause", "class_pressure") - handedOver.size());
            handedOver.forEach(Lease::release);
            assertThat(tier.usage().evictedLeasedBytes()).isZero();
            tier.close();
            tier = null;
        }
    }

    /**
     * A dry class with every image unleased, and four threads reserving in it at once (a peer
     * fetch's connections, each landing a page): every reservation gets a slot. Concurrent
     * reservations pick the same coldest victim; the one that loses the removal must look for
     * another rather than be refused NO_FREE_SLOT while unleased images remain.
     */
    @ParameterizedTest
    @EnumSource(DramEviction.class)
    void concurrentReservationsInAFullClassAllFindASlot(DramEviction eviction) throws Exception {
        // the 4 KiB class runs dry far below the index bound (the 16 KiB class stays empty): class pressure
        tier = DramTier.open(new DramTierConfig(dir, "test", List.of(new SizeClass(K4, 32), new SizeClass(K16, 64)),
                8L * K4, K16, 64, eviction), stream, registry);
        for (int i = 0; i < 32; i++) publish(key(i), K4);
        int threads = 4;
        int perThread = 2_000;
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            CountDownLatch start = new CountDownLatch(1);
            List<Future<List<ReserveResult>>> refusals = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                long first = 1_000 + (long) t * perThread;
                refusals.add(pool.submit(() -> {
                    start.await();
                    List<ReserveResult> refused = new ArrayList<>();
                    for (long k = first; k < first + perThread; k++) {
                        ReserveResult r = tier.reserve(key(k), 7, K4);
                        if (r instanceof Reservation reservation) tier.commit(reservation);
                        else refused.add(r);
                    }
                    return refused;
                }));
            }
            start.countDown();
            for (Future<List<ReserveResult>> f : refusals) {
                assertThat(f.get(60, TimeUnit.SECONDS)).as("refused reservations (%s)", eviction).isEmpty();
            }
        } finally {
            pool.shutdownNow();
        }
        assertThat(counter("orbitkv.dram.reservations.failed", "reason", "no_free_slot")).isZero();
    }

    /**
     * A settled hit marks its leased images needed once per image: the first mark answers true
     * (the retention ledger is told), later marks of the same image false from any lease; the
     * slot's next image starts unmarked.
     */
    @Test
    void anImageIsMarkedNeededOncePerImageNotPerSlot() throws IOException {
        openSmall();
        publish(key(1), K4);
        Lease first = lease(key(1));
        Lease second = lease(key(1));
        assertThat(first.markNeeded()).isTrue();
        assertThat(first.markNeeded()).isFalse();
        assertThat(second.markNeeded()).as("another lease on the same image").isFalse();
        int slot = first.slot();
        first.release();
        second.release();
        assertThat(tier.evict(key(1), 7)).isTrue();
        for (int i = 2; i < 40; i++) {
            publish(key(i), K4);
            Lease l = lease(key(i));
            boolean fresh = l.markNeeded();
            boolean sameSlot = l.slot() == slot;
            l.release();
            assertThat(fresh).as("image %d (slot %d)", i, slot).isTrue();
            if (sameSlot) return;
        }
        throw new AssertionError("slot " + slot + " was never reused");
    }

    /** RunKeys over fixed keys that keep the tier's hints, as a remembered prompt does. */
    private static final class HintedKeys implements DramTier.RunKeys {
        final List<StateKey> keys;
        final Object[] hints;

        HintedKeys(List<StateKey> keys) {
            this.keys = keys;
            this.hints = new Object[keys.size()];
        }

        @Override
        public StateKey key(int index) {
            return keys.get(index);
        }

        @Override
        public Object hint(int index) {
            return hints[index];
        }

        @Override
        public void remember(int index, Object found) {
            hints[index] = found;
        }
    }

    /** A tier under the chain policy (hints on) holding keys 1..{@code pages} of 4 KiB, and a run over them. */
    private HintedKeys hintedRunOnAChainTier(int pages) throws IOException {
        tier = DramTier.open(DramTierConfig.of(dir, "test", List.of(new SizeClass(K4, 8))).withEviction(DramEviction.CHAIN),
                stream, registry);
        List<StateKey> run = new java.util.ArrayList<>();
        for (int k = 1; k <= pages; k++) {
            publish(key(k), K4);
            run.add(key(k));
        }
        return new HintedKeys(run);
    }

    /** At an engine's cadence a page may be evicted and published again between two requests of a prompt. */
    @Test
    void aKeyPublishedAgainSinceItsHintIsFoundInTheIndexAndTheRunGoesOn() throws IOException {
        HintedKeys run = hintedRunOnAChainTier(3);
        StateKey[] keys = new StateKey[3];
        Lease[] leases = new Lease[3];
        assertThat(tier.acquireRun(run, 0, 3, 7, keys, leases)).isEqualTo(3);
        Object stale = run.hints[1];
        long oldImage = leases[1].imageId();
        tier.releaseAll(leases, 3);

        assertThat(tier.evict(key(2), 7)).isTrue();
        publish(key(2), K4); // a new image of the same key
        java.util.Arrays.fill(leases, null);
        assertThat(tier.acquireRun(run, 0, 3, 7, keys, leases)).as("the whole run, through the re-published page").isEqualTo(3);
        assertThat(leases[1].imageId()).isNotEqualTo(oldImage);
        assertThat(hasCanary(leases[1].segment(), key(2))).isTrue();
        assertThat(hasCanary(leases[2].segment(), key(3))).isTrue();
        assertThat(run.hints[1]).as("the new image remembered").isNotNull().isNotSameAs(stale);
        tier.releaseAll(leases, 3);
    }

    /**
     * A hint the tier kept for a page (its resident image) lets a repeated run skip the index
     * probe; once that image is evicted and its slot holds another key's image, the hint fails its
     * pin and is forgotten, and as the key is not in the index either, the run stops there: no
     * lease on the other key's image, and the next run probes.
     */
    @Test
    void aStaleHintStopsTheRunAndIsForgottenNeverLeasingAnotherImage() throws IOException {
        HintedKeys run = hintedRunOnAChainTier(2);
        StateKey[] keys = new StateKey[2];
        Lease[] leases = new Lease[2];
        assertThat(tier.acquireRun(run, 0, 2, 7, keys, leases)).isEqualTo(2);
        assertThat(run.hints).doesNotContainNull();
        int slotOf2 = leases[1].slot();
        tier.releaseAll(leases, 2);

        assertThat(tier.acquireRun(run, 0, 2, 7, keys, leases)).as("hinted run").isEqualTo(2);
        assertThat(hasCanary(leases[1].segment(), key(2))).isTrue();
        tier.releaseAll(leases, 2);

        assertThat(tier.evict(key(2), 7)).isTrue();
        boolean reused = false;
        for (int i = 3; i < 40 && !reused; i++) {
            publish(key(i), K4);
            Lease probe = lease(key(i));
            reused = probe.slot() == slotOf2;
            probe.release();
            if (!reused) assertThat(tier.evict(key(i), 7)).isTrue();
        }
        assertThat(reused).as("slot %d reused by another key", slotOf2).isTrue();

        java.util.Arrays.fill(leases, null);
        assertThat(tier.acquireRun(run, 0, 2, 7, keys, leases)).as("stopped at the stale hint").isEqualTo(1);
        assertThat(leases[1]).isNull();
        assertThat(run.hints[1]).as("the stale hint is forgotten").isNull();
        assertThat(hasCanary(leases[0].segment(), key(1))).isTrue();
        tier.releaseAll(leases, 1);
        assertThat(tier.acquireRun(run, 1, 2, 7, keys, leases)).as("probed: key 2 is not resident").isEqualTo(1);
        assertThat(leases[1]).isNull();
    }
}
