package io.orbitkv.router;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.testkit.TestSeed;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;

class PrefixIndexTest {

    @Test
    void coverageFollowsTheChainAndStopsAtTheFirstBlockNoTrustedWorkerHolds() {
        PrefixIndex idx = new PrefixIndex(100);
        idx.stored(0, Tier.DRAM, 1);
        idx.stored(1, Tier.DRAM, 2);
        idx.stored(0, Tier.SSD, 3);
        idx.stored(1, Tier.HBM, 4);     // HBM is local to w1: no peer reads it
        idx.stored(2, Tier.DRAM, 5);
        Coverage[] c = idx.cover(new long[] {1, 2, 3, 4, 5}, 3, 0b111);
        assertThat(c[0]).isEqualTo(new Coverage(1, 1, 1, 0, 1));   // 4 is not obtainable on w0: stops there
        assertThat(c[1]).isEqualTo(new Coverage(2, 0, 2, 1, 0));   // 1 from w0, 2 and 4 local, 3 from w0's SSD, 5 from w2
        assertThat(c[1].localPrefixBlocks()).isZero();
        assertThat(c[2]).isEqualTo(new Coverage(0, 0, 2, 1, 0));   // 1, 2 peer DRAM, 3 peer SSD, 4 stops
        Coverage[] untrusted = idx.cover(new long[] {1, 2, 3, 4, 5}, 3, 0b110);
        assertThat(untrusted[0]).isEqualTo(Coverage.NONE);
        assertThat(untrusted[1]).isEqualTo(Coverage.NONE);      // block 1 only w0 has
    }

    @Test
    void theOldestStoredBlockIsForgottenPastTheBoundAndARestoreRefreshesIt() {
        PrefixIndex idx = new PrefixIndex(3);
        idx.stored(0, Tier.DRAM, 1);
        idx.stored(0, Tier.DRAM, 2);
        idx.stored(0, Tier.DRAM, 3);
        idx.stored(1, Tier.SSD, 1);      // refreshes 1
        idx.stored(0, Tier.DRAM, 4);     // evicts 2
        assertThat(idx.size()).isEqualTo(3);
        assertThat(idx.evictedTotal()).isEqualTo(1);
        assertThat(idx.holds(0, Tier.DRAM, 2)).isFalse();
        assertThat(idx.holds(0, Tier.DRAM, 1)).isTrue();
        assertThat(idx.holds(1, Tier.SSD, 1)).isTrue();
    }

    /** Against a plain set model: random stores, removes and clears keep the same holdings, never over the bound. */
    @Test
    void randomUpdatesMatchASetModel() {
        long seed = TestSeed.get();
        Random rnd = new Random(seed);
        PrefixIndex idx = new PrefixIndex(1_000_000);
        Map<Long, Set<String>> model = new HashMap<>();
        for (int step = 0; step < 20_000; step++) {
            int w = rnd.nextInt(8);
            Tier t = Tier.values()[rnd.nextInt(3)];
            long key = rnd.nextInt(500);
            int op = rnd.nextInt(20);
            if (op == 0) {
                idx.clearWorker(w);
                for (Set<String> s : model.values()) s.removeIf(e -> e.startsWith(w + "/"));
            } else if (op < 12) {
                idx.stored(w, t, key);
                model.computeIfAbsent(key, k -> new HashSet<>()).add(w + "/" + t);
            } else {
                idx.removed(w, t, key);
                Set<String> s = model.get(key);
                if (s != null) s.remove(w + "/" + t);
            }
        }
        model.values().removeIf(Set::isEmpty);
        assertThat(idx.size()).as("seed %d", seed).isEqualTo(model.size());
        for (long key = 0; key < 500; key++) {
            for (int w = 0; w < 8; w++) {
                for (Tier t : Tier.values()) {
                    boolean expected = model.getOrDefault(key, Set.of()).contains(w + "/" + t);
                    assertThat(idx.holds(w, t, key)).as("seed %d key %d w %d %s", seed, key, w, t).isEqualTo(expected);
                }
            }
        }
    }
}
