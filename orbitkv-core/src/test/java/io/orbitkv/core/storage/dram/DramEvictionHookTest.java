package io.orbitkv.core.storage.dram;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.state.StateKey;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static io.orbitkv.core.storage.dram.TestImages.hasCanary;
import static io.orbitkv.core.storage.dram.TestImages.key;
import static io.orbitkv.core.storage.dram.TestImages.writeCanary;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The hooks the publish pipeline uses: eviction listener, quiet image leases, shared leases, padded views. */
class DramEvictionHookTest {

    private static final int K4 = 4096;

    @TempDir
    Path dir;

    private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
    private DramTier tier;
    private final List<Lease> offered = new ArrayList<>();
    private final List<Integer> offeredNamespaces = new ArrayList<>();

    @AfterEach
    void closeTier() {
        if (tier != null) tier.close();
    }

    /** 4 slots of 4 KiB: index weight 2 slots, 1 reserved, 1 evicted-but-leased. */
    private void open(boolean listen) throws IOException {
        open(listen, K4);
    }

    private void open(boolean listen, long reservedBudgetBytes) throws IOException {
        tier = DramTier.open(new DramTierConfig(dir, "hook", List.of(new SizeClass(K4, 4)), reservedBudgetBytes, K4,
                        64),
                new ResidencyStream(256), registry);
        if (listen) {
            tier.setEvictionListener((lease, ns) -> {
                offered.add(lease);
                offeredNamespaces.add(ns);
            });
        }
    }

    private long publish(StateKey key, int namespaceId, int lengthBytes) {
        Reservation r = (Reservation) tier.reserve(key, namespaceId, lengthBytes);
        writeCanary(r.segment(), key);
        return ((CommitResult.Inserted) tier.commit(r)).imageId();
    }

    @Test
    void anEvictedImageIsHandedOverLeasedAndItsSlotWaitsForThatLease() throws IOException {
        open(true);
        long image = publish(key(1), 5, 1000);
        assertThat(tier.evict(key(1))).isTrue();
        assertThat(offered).hasSize(1);
        Lease retained = offered.getFirst();
        assertThat(retained.imageId()).isEqualTo(image);
        assertThat(offeredNamespaces).containsExactly(5);
        assertThat(tier.contains(key(1))).isFalse();
        assertThat(tier.usage().evictedLeasedBytes()).isEqualTo(K4);
        assertThat(hasCanary(retained.segment(), key(1))).isTrue();
        // The slot is not reused while retained: new images go elsewhere and leave the bytes intact.
        publish(key(2), 5, 1000);
        publish(key(3), 5, 1000);
        assertThat(hasCanary(retained.segment(), key(1))).isTrue();
        assertThat(counterOf("hits")).as("a handover is not a hit").isZero();
        retained.release();
        assertThat(tier.usage().evictedLeasedBytes()).isZero();
        assertThat(tier.usage().leases()).isZero();
    }

    @Test
    void policyEvictionsAreOfferedButNamespaceDropsAreNot() throws IOException {
        open(true);
        publish(key(1), 1, 100);
        publish(key(2), 2, 100);
        publish(key(3), 2, 100); // the index holds two slots: W-TinyLFU evicts one of them
        tier.runMaintenance();
        assertThat(offered).hasSize(1);
        offered.forEach(Lease::release);
        offered.clear();
        int dropped = tier.evictNamespace(2);
        assertThat(dropped).isPositive();
        assertThat(offered).isEmpty();
        assertThat(tier.usage().leases()).isZero();
    }

    @Test
    void withoutAListenerEvictionFreesTheSlotAtOnce() throws IOException {
        open(false);
        publish(key(1), 1, 100);
        tier.evict(key(1));
        assertThat(tier.usage().evictedLeasedBytes()).isZero();
        assertThat(tier.usage().usedBytes()).isZero();
    }

    @Test
    void onlyOneListenerMayBeSet() throws IOException {
        open(true);
        assertThatThrownBy(() -> tier.setEvictionListener((l, ns) -> l.release()))
                .isInstanceOf(IllegalStateException.class);
    }

    @Test
    void acquireImageLeasesOnlyThatImageAndIsNotAUse() throws IOException {
        open(false);
        long image = publish(key(1), 1, 100);
        assertThat(tier.acquireImage(key(1), 1, image + 1)).isEqualTo(new AcquireResult.Miss(key(1)));
        AcquireResult r = tier.acquireImage(key(1), 1, image);
        assertThat(r).isInstanceOf(Lease.class);
        ((Lease) r).release();
        assertThat(counterOf("hits")).isZero();
        tier.evict(key(1));
        assertThat(tier.acquireImage(key(1), 1, image)).isEqualTo(new AcquireResult.Miss(key(1)));
    }

    @Test
    void shareGivesASecondLeaseThatSurvivesEvictionAndTheFirstRelease() throws IOException {
        open(false);
        publish(key(1), 1, 100);
        Lease first = (Lease) tier.acquire(key(1), 1);
        tier.evict(key(1));
        Lease second = (Lease) tier.share(first);
        assertThat(tier.usage().leases()).isEqualTo(2);
        first.release();
        assertThat(tier.usage().evictedLeasedBytes()).isEqualTo(K4);
        assertThat(hasCanary(second.segment(), key(1))).isTrue();
        second.release();
        assertThat(tier.usage().evictedLeasedBytes()).isZero();
        assertThat(tier.share(second)).isEqualTo(new AcquireResult.Miss(key(1)));
    }

    @Test
    void blockSegmentsArePaddedTo4KiBAndAligned() throws IOException {
        open(false);
        Reservation r = (Reservation) tier.reserve(key(1), 1, 1000);
        assertThat(r.segment().byteSize()).isEqualTo(1000);
        assertThat(r.blockSegment().byteSize()).isEqualTo(K4);
        assertThat(r.blockSegment().address() % K4).isZero();
        writeCanary(r.segment(), key(1));
        tier.commit(r);
        try (Lease lease = (Lease) tier.acquire(key(1), 1)) {
            assertThat(lease.blockSegment().byteSize()).isEqualTo(K4);
            assertThat(lease.blockSegment().isReadOnly()).isTrue();
            assertThat(lease.blockSegment().address()).isEqualTo(r.blockSegment().address());
        }
    }

    @Test
    void commitAndAcquireLeasesTheNewImageEvenWhenThePolicyEvictsItAtOnce() throws IOException {
        open(true);
        publish(key(1), 1, 100);
        publish(key(2), 1, 100);
        for (int i = 0; i < 20; i++) {
            ((Lease) tier.acquire(key(1), 1)).release();
            ((Lease) tier.acquire(key(2), 1)).release();
        }
        tier.runMaintenance();
        Reservation r = (Reservation) tier.reserve(key(3), 1, 100);
        writeCanary(r.segment(), key(3));
        AcquireResult result = tier.commitAndAcquire(r);
        tier.runMaintenance();
        assertThat(result).isInstanceOf(Lease.class);
        Lease lease = (Lease) result;
        assertThat(lease.imageId()).isEqualTo(r.imageId());
        // W-TinyLFU refuses the cold newcomer against two hot residents: it is out of the index...
        assertThat(tier.contains(key(3))).isFalse();
        offered.forEach(Lease::release);
        // ...yet this caller's bytes stay put until it lets go.
        assertThat(hasCanary(lease.segment(), key(3))).isTrue();
        assertThat(tier.usage().evictedLeasedBytes()).isEqualTo(K4);
        lease.release();
        assertThat(tier.usage().evictedLeasedBytes()).isZero();
        assertThat(tier.usage().leases()).isZero();
        assertThat(counterOf("hits")).isEqualTo(40);
    }

    @Test
    void commitAndAcquireOfADuplicateLeasesTheResidentImage() throws IOException {
        open(false, 2 * K4);
        Reservation first = (Reservation) tier.reserve(key(1), 1, 100);
        Reservation late = (Reservation) tier.reserve(key(1), 1, 100);
        writeCanary(first.segment(), key(1));
        long resident = ((CommitResult.Inserted) tier.commit(first)).imageId();
        AcquireResult r = tier.commitAndAcquire(late);
        assertThat(r).isInstanceOfSatisfying(Lease.class, l -> {
            assertThat(l.imageId()).isEqualTo(resident);
            l.release();
        });
        assertThat(tier.commitAndAcquire(late)).isEqualTo(new AcquireResult.Miss(key(1)));
        assertThat(tier.usage().reservedBytes()).isZero();
    }

    /** A counter the slot table keeps ({@code hits}, {@code inserts}, {@code evictions}). */
    private double counterOf(String name) {
        return registry.get("orbitkv.dram." + name).functionCounter().count();
    }
}
