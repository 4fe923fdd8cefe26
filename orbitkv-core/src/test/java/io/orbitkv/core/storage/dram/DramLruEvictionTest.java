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
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

import static io.orbitkv.core.storage.dram.TestImages.hasCanary;
import static io.orbitkv.core.storage.dram.TestImages.key;
import static io.orbitkv.core.storage.dram.TestImages.writeCanary;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@link DramEviction#LRU}: a full index evicts exactly the least recently published or used
 * image, admits every newcomer, passes over leased images while an unleased one exists, and
 * hands its evictions to the eviction listener like policy evictions.
 */
class DramLruEvictionTest {

    private static final int K4 = 4096;
    /** 12 slots of 4 KiB, 8 KiB reserved and 8 KiB evicted-leased budgets: the index holds 8 images. */
    private static final int INDEX_PAGES = 8;

    @TempDir
    Path dir;

    private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
    private DramTier tier;

    @AfterEach
    void closeTier() {
        if (tier != null) tier.close();
    }

    private DramTier open(DramEviction eviction) throws IOException {
        DramTierConfig config = new DramTierConfig(dir, "lru", List.of(new SizeClass(K4, 12)), 2 * K4, 2 * K4, 64,
                eviction);
        assertThat(config.indexWeightBytes()).isEqualTo((long) INDEX_PAGES * K4);
        tier = DramTier.open(config, new ResidencyStream(4096), registry);
        return tier;
    }

    private long publish(StateKey key) {
        Reservation r = (Reservation) tier.reserve(key, 1, K4);
        writeCanary(r.segment(), key);
        CommitResult c = tier.commit(r);
        assertThat(c).isInstanceOf(CommitResult.Inserted.class);
        return ((CommitResult.Inserted) c).imageId();
    }

    private void use(StateKey key) {
        AcquireResult a = tier.acquire(key, 1);
        assertThat(a).as("a hit on %s", key).isInstanceOf(Lease.class);
        Lease lease = (Lease) a;
        assertThat(hasCanary(lease.segment(), key)).isTrue();
        lease.release();
    }

    @Test
    void aFullIndexEvictsTheLeastRecentlyUsedImage() throws IOException {
        open(DramEviction.LRU);
        for (int i = 0; i < INDEX_PAGES; i++) publish(key(i));
        use(key(0)); // key 0 is now the most recent; key 1 the least
        publish(key(100));
        assertThat(tier.contains(key(1))).as("the least recent image is evicted").isFalse();
        assertThat(tier.contains(key(0))).as("a used image is kept").isTrue();
        assertThat(tier.contains(key(100))).isTrue();
        publish(key(101));
        assertThat(tier.contains(key(2))).isFalse();
        assertThat(tier.usage().residentImages()).isEqualTo(INDEX_PAGES);
        assertThat(tier.usage().usedBytes()).isEqualTo(tier.config().indexWeightBytes());
        assertThat(registry.get("orbitkv.dram.evictions").tag("cause", "policy").functionCounter().count()).isEqualTo(2);
    }

    @Test
    void everyNewcomerIsAdmittedEvenAgainstHotImages() throws IOException {
        open(DramEviction.LRU);
        for (int i = 0; i < INDEX_PAGES; i++) publish(key(i));
        for (int round = 0; round < 20; round++) {
            for (int i = 0; i < INDEX_PAGES; i++) use(key(i));
        }
        publish(key(200));
        assertThat(tier.contains(key(200))).as("the one-off newcomer is resident").isTrue();
        assertThat(tier.contains(key(0))).as("the least recently used hot image made room").isFalse();
    }

    @Test
    void publishingAResidentPageIsAUse() throws IOException {
        open(DramEviction.LRU);
        for (int i = 0; i < INDEX_PAGES; i++) publish(key(i));
        // An engine publishes a batch [key 0 (resident, least recent), new key]: the answer for key 0
        // must keep it from being the victim of the new key's commit.
        assertThat(tier.reserve(key(0), 1, K4)).isInstanceOf(ReserveResult.AlreadyResident.class);
        publish(key(400));
        assertThat(tier.contains(key(0))).isTrue();
        assertThat(tier.contains(key(1))).as("the least recent page after the touch").isFalse();
    }

    @Test
    void leasedImagesArePassedOverWhileAnUnleasedOneExists() throws IOException {
        open(DramEviction.LRU);
        long first = publish(key(0));
        for (int i = 1; i < INDEX_PAGES; i++) publish(key(i));
        Lease held = (Lease) tier.acquireImage(key(0), 1, first); // a quiet lease: key 0 stays least recent
        publish(key(300));
        assertThat(tier.contains(key(0))).as("the leased least recent image stays").isTrue();
        assertThat(tier.contains(key(1))).as("the least recent unleased image goes").isFalse();
        held.release();
    }

    @Test
    void evictionsAreHandedToTheEvictionListener() throws IOException {
        open(DramEviction.LRU);
        List<StateKey> handed = new ArrayList<>();
        tier.setEvictionListener((lease, ns) -> {
            handed.add(lease.key());
            assertThat(hasCanary(lease.segment(), lease.key())).isTrue();
            lease.release();
        });
        for (int i = 0; i < INDEX_PAGES + 3; i++) publish(key(i));
        assertThat(handed).containsExactly(key(0), key(1), key(2));
        assertThat(tier.usage().evictedLeasedBytes()).isZero();
    }

    /** A random sequence of publishes and hits agrees step by step with a textbook LRU of the same capacity. */
    @Test
    void residencyMatchesAnLruModel() throws IOException {
        long seed = Long.getLong("orbitkv.lru.seed", 20261201L);
        SplittableRandom random = new SplittableRandom(seed);
        open(DramEviction.LRU);
        LinkedHashMap<Integer, Boolean> model = new LinkedHashMap<>(16, 0.75f, true) {
            private static final long serialVersionUID = 1L;

            @Override
            protected boolean removeEldestEntry(Map.Entry<Integer, Boolean> eldest) {
                return size() > INDEX_PAGES;
            }
        };
        for (int step = 0; step < 5000; step++) {
            int k = random.nextInt(24);
            if (model.get(k) != null) {
                use(key(k));
            } else {
                assertThat(tier.contains(key(k))).as("seed %d step %d: key %d", seed, step, k).isFalse();
                publish(key(k));
                model.put(k, Boolean.TRUE);
            }
            for (int j = 0; j < 24; j++) {
                assertThat(tier.contains(key(j))).as("seed %d step %d: key %d resident", seed, step, j)
                        .isEqualTo(model.containsKey(j));
            }
        }
    }

    @Test
    void wTinyLfuStillRefusesAColdNewcomerAgainstHotImages() throws IOException {
        open(DramEviction.W_TINY_LFU);
        for (int i = 0; i < INDEX_PAGES; i++) publish(key(i));
        for (int round = 0; round < 20; round++) {
            for (int i = 0; i < INDEX_PAGES; i++) use(key(i));
        }
        publish(key(200));
        tier.runMaintenance();
        assertThat(tier.contains(key(200))).as("W-TinyLFU keeps the hot set").isFalse();
    }
}
