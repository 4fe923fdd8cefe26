package io.orbitkv.core.storage.dram;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.state.StateKey;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;

import static io.orbitkv.core.storage.dram.TestImages.hasCanary;
import static io.orbitkv.core.storage.dram.TestImages.key;
import static io.orbitkv.core.storage.dram.TestImages.writeCanary;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The bulk lease path of a query ({@link DramTier#acquireRun}: a run of pins under one slot-table
 * lock trip) and the bulk release ({@link DramTier#releaseAll}), against the per-key path they
 * replace: same leases, same stop at the first page that is not resident, same counts, and an
 * evicted leased slot kept until the bulk release ({@link DramRunStressTest} races them).
 */
class DramRunTest {

    private static final int K4 = 4096;
    private static final int NAMESPACE = 7;

    @TempDir
    Path dir;

    private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
    private DramTier tier;

    @AfterEach
    void closeTier() {
        if (tier != null) tier.close();
    }

    /** One 4 KiB class; the index holds what the reservation and evicted-leased budgets leave. */
    private DramTier open(int slots, int evictedLeasedSlots) throws IOException {
        tier = DramTier.open(new DramTierConfig(dir, "run", List.of(new SizeClass(K4, slots)), 2L * K4,
                (long) evictedLeasedSlots * K4, 64),
                new ResidencyStream(4096), registry);
        return tier;
    }

    private static boolean publish(DramTier t, StateKey key, int namespaceId) {
        if (!(t.reserve(key, namespaceId, K4) instanceof Reservation r)) return false;
        writeCanary(r.segment(), key);
        return t.commit(r) instanceof CommitResult.Inserted;
    }

    private double hits() {
        return registry.get("orbitkv.dram.hits").functionCounter().count();
    }

    @Test
    void leasesTheLeadingResidentRunAndStopsAtTheFirstAbsentKey() throws IOException {
        open(256, 8);
        int n = 150; // more than two runs of RUN_PAGES
        for (int i = 0; i < n; i++) if (i != 140) assertThat(publish(tier, key(i), NAMESPACE)).isTrue();
        StateKey[] keys = new StateKey[n];
        Lease[] leases = new Lease[n];
        int[] derived = {0};
        double hitsBefore = hits();

        int end = tier.acquireRun(i -> {
            derived[0]++;
            return key(i);
        }, 0, n, NAMESPACE, keys, leases);

        assertThat(end).as("stops at the absent page").isEqualTo(140);
        assertThat(derived[0]).as("no key derived past the stop").isEqualTo(141);
        assertThat(keys[140]).as("the stop page's key is handed back").isEqualTo(key(140));
        assertThat(leases[140]).isNull();
        assertThat(keys[141]).isNull();
        for (int i = 0; i < 140; i++) {
            assertThat(leases[i].key()).isEqualTo(key(i));
            assertThat(hasCanary(leases[i].segment(), key(i))).as("page %d's bytes", i).isTrue();
        }
        assertThat(tier.usage().leases()).isEqualTo(140);
        assertThat(hits() - hitsBefore).as("a hit per lease, no miss for the stop page").isEqualTo(140);

        assertThat(tier.releaseAll(leases, n)).isEqualTo(140);
        assertThat(tier.usage().leases()).isZero();
        assertThat(tier.releaseAll(leases, n)).as("a second release of the same leases is a no-op").isZero();
        assertThat(leases[0].release()).isEqualTo(ReleaseResult.ALREADY_RELEASED);
        assertThat(tier.usage().leases()).isZero();
    }

    @Test
    void anotherNamespacesImageStopsTheRunUnleased() throws IOException {
        open(64, 8);
        assertThat(publish(tier, key(0), NAMESPACE)).isTrue();
        assertThat(publish(tier, key(1), NAMESPACE + 1)).isTrue();
        assertThat(publish(tier, key(2), NAMESPACE)).isTrue();
        StateKey[] keys = new StateKey[3];
        Lease[] leases = new Lease[3];

        int end = tier.acquireRun(TestImages::key, 0, 3, NAMESPACE, keys, leases);

        assertThat(end).isEqualTo(1);
        assertThat(leases[1]).isNull();
        assertThat(tier.usage().leases()).as("the other namespace's image is not pinned").isEqualTo(1);
        // The caller resumes after the stop page, as the planner does after its own lookup of it.
        assertThat(tier.acquireRun(TestImages::key, 2, 3, NAMESPACE, keys, leases)).isEqualTo(3);
        assertThat(leases[2].key()).isEqualTo(key(2));
        assertThat(tier.releaseAll(leases, 3)).isEqualTo(2);
        assertThat(tier.usage().leases()).isZero();
    }

    @Test
    void anEvictedLeasedImageKeepsItsSlotUntilTheBulkRelease() throws IOException {
        open(16, 4);
        for (int i = 0; i < 4; i++) assertThat(publish(tier, key(i), NAMESPACE)).isTrue();
        StateKey[] keys = new StateKey[4];
        Lease[] leases = new Lease[4];
        assertThat(tier.acquireRun(TestImages::key, 0, 4, NAMESPACE, keys, leases)).isEqualTo(4);
        for (int i = 0; i < 4; i++) assertThat(tier.evict(key(i))).isTrue();
        // Fill every slot the tier can give: none of the leased four may be handed out.
        for (int i = 100; i < 112; i++) publish(tier, key(i), NAMESPACE);
        for (int i = 0; i < 4; i++) {
            assertThat(hasCanary(leases[i].segment(), key(i))).as("leased page %d kept its bytes", i).isTrue();
        }
        assertThat(tier.usage().evictedLeasedBytes()).isEqualTo(4L * K4);
        assertThat(tier.releaseAll(leases, 4)).isEqualTo(4);
        assertThat(tier.usage().evictedLeasedBytes()).isZero();
        assertThat(tier.usage().leases()).isZero();
    }
}
