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
 * {@link DramEviction#CHAIN}: a full index evicts leaves of the prefix forest its commits' chain
 * links describe, so a chain loses its last page first and keeps its head; a leased page is never
 * the victim while an unleased one exists; links to pages of another namespace or to evicted
 * pages are ignored.
 */
class DramChainEvictionTest {

    private static final int K4 = 4096;
    /** 10 slots of 4 KiB, one reserved slot, no evicted-leased budget: the index holds 9 images. */
    private static final int INDEX_PAGES = 9;

    @TempDir
    Path dir;

    private DramTier tier;

    @AfterEach
    void closeTier() {
        if (tier != null) tier.close();
    }

    private DramTier open() throws IOException {
        DramTierConfig config = new DramTierConfig(dir, "chain", List.of(new SizeClass(K4, INDEX_PAGES + 1)), K4, 0,
                64, DramEviction.CHAIN);
        assertThat(config.indexWeightBytes()).isEqualTo((long) INDEX_PAGES * K4);
        tier = DramTier.open(config, new ResidencyStream(4096), new SimpleMeterRegistry());
        return tier;
    }

    /** Publishes keys {@code from..to-1} as one run, the first under {@code parent} (may be null). */
    private void run(StateKey parent, int namespaceId, long from, long to) {
        StateKey before = parent;
        for (long i = from; i < to; i++) {
            StateKey key = key(i);
            Reservation r = (Reservation) tier.reserve(key, namespaceId, K4);
            writeCanary(r.segment(), key);
            r.chain(new ChainLink(before, i == from, i == to - 1));
            assertThat(tier.commit(r)).isInstanceOf(CommitResult.Inserted.class);
            before = key;
        }
    }

    private boolean resident(long i) {
        if (!(tier.acquire(key(i), 1) instanceof Lease lease)) return false;
        try {
            assertThat(hasCanary(lease.segment(), key(i))).isTrue();
            return true;
        } finally {
            lease.release();
        }
    }

    @Test
    void anOldChainLosesItsTailFirstAndKeepsItsHead() throws IOException {
        open();
        run(null, 1, 0, 6);      // an old chain: 0 <- 1 <- ... <- 5
        run(null, 1, 100, 103);  // a younger one
        // Under LRU the next two inserts would evict pages 0 and 1, the head of the old chain.
        run(null, 1, 200, 202);
        assertThat(resident(0)).as("the old chain's head").isTrue();
        assertThat(resident(1)).isTrue();
        assertThat(resident(5)).as("the old chain's last page").isFalse();
        assertThat(resident(4)).isFalse();
        for (long i : new long[] {2, 3, 100, 101, 102, 200, 201}) assertThat(resident(i)).as("page %d", i).isTrue();
        assertThat(tier.usage().residentImages()).isEqualTo(INDEX_PAGES);
    }

    @Test
    void aLeasedLeafIsNeverTheVictimAndItsParentStaysWhileItLives() throws IOException {
        open();
        run(null, 1, 0, 3);                               // 0 <- 1 <- 2
        Lease held = (Lease) tier.acquire(key(2), 1);         // the leaf is leased
        run(null, 1, 100, 106);                           // fills the index
        run(null, 1, 200, 203);                           // three evictions
        assertThat(held.segment().get(java.lang.foreign.ValueLayout.JAVA_LONG, 0)).isNotZero();
        assertThat(resident(2)).as("the leased leaf").isTrue();
        assertThat(resident(1)).as("its parent: it has a resident child").isTrue();
        assertThat(resident(0)).isTrue();
        held.release();
        assertThat(tier.usage().residentImages()).isEqualTo(INDEX_PAGES);
    }

    @Test
    void aLinkToAnotherNamespacesPageIsIgnored() throws IOException {
        open();
        run(null, 2, 0, 1);                  // page 0 of namespace 2
        run(key(0), 1, 1, 2);                // claims page 0 as its parent: not linked, a root
        run(null, 1, 100, 107);              // fills: 0 and 1 are the oldest leaves
        run(null, 1, 200, 201);              // one eviction: linked, 0 would be kept for its child 1
        assertThat(tier.acquire(key(0), 1)).isInstanceOf(AcquireResult.Miss.class);
        assertThat(resident(1)).isTrue();
    }
}
