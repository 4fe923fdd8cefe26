package io.orbitkv.bench.trace;

import io.orbitkv.core.storage.dram.DramEviction;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The committed trace slice through the Manager's DRAM tier and its real eviction policies
 * ({@link TierReplay}): the chain-aware policy serves at least what LRU serves at every capacity,
 * and the tier under LRU serves exactly what the offline LRU computes (so the replay counts as
 * the simulators do).
 */
class TierReplayTest {

    private static final int BLOCK_TOKENS = 512;

    @TempDir
    Path dir;

    @Test
    void chainServesAtLeastWhatLruServesOnTheSliceAtEveryCapacity() throws Exception {
        List<TraceRequest> trace = TraceReader.read(TraceReplayTest.slice(), 0, Integer.MAX_VALUE);
        int unique = PrefixSimulator.uniqueBlocks(trace);
        for (int percent : new int[] {5, 10, 25, 50}) {
            int capacity = Math.max(1, unique * percent / 100);
            PrefixSimulator.Result lru = TierReplay.run(trace, capacity, DramEviction.LRU, BLOCK_TOKENS, dir);
            PrefixSimulator.Result chain = TierReplay.run(trace, capacity, DramEviction.CHAIN, BLOCK_TOKENS, dir);
            PrefixSimulator.Result offline = PrefixSimulator.run(trace, new LruPolicy(capacity), BLOCK_TOKENS);
            System.out.printf("slice %d %%: %d blocks, tier lru %.4f, tier chain %.4f, offline lru %.4f%n",
                    percent, capacity, lru.hitRatio(), chain.hitRatio(), offline.hitRatio());
            assertThat(lru.hitTokens()).as("tier LRU against offline LRU at %d %%", percent)
                    .isEqualTo(offline.hitTokens());
            assertThat(chain.hitTokens()).as("chain against LRU at %d %%", percent)
                    .isGreaterThanOrEqualTo(lru.hitTokens());
        }
        assertThat(TierReplay.run(trace, unique / 4, DramEviction.CHAIN, BLOCK_TOKENS, dir).hitTokens()).isPositive();
    }
}
