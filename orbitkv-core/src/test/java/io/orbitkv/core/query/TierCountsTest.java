package io.orbitkv.core.query;

import io.orbitkv.core.query.QueryMetrics.Tier;
import io.orbitkv.core.query.QueryMetrics.TierCounts;
import org.junit.jupiter.api.Test;

import java.util.SplittableRandom;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** Splitting a hit's tokens over tiers by pages: exact sums, proportional floors, remainder to the largest. */
class TierCountsTest {

    @Test
    void splitsProportionallyWithTheRemainderOnTheLargestTier() {
        assertThat(new TierCounts(1, 2, 0).split(48)).isEqualTo(new TierCounts(16, 32, 0));
        assertThat(new TierCounts(1, 1, 1).split(10)).isEqualTo(new TierCounts(4, 3, 3));
        assertThat(new TierCounts(0, 1, 2).split(10)).isEqualTo(new TierCounts(0, 3, 7));
        assertThat(new TierCounts(0, 0, 0).split(5)).isEqualTo(new TierCounts(5, 0, 0));
        assertThat(TierCounts.ZERO.plus(Tier.PEER, 3).plus(Tier.SSD, 1).total()).isEqualTo(4);
        assertThatThrownBy(() -> new TierCounts(-1, 0, 0)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void partsAlwaysAddUpAndStayWithinOneOfTheirShare() {
        long seed = Long.getLong("orbitkv.test.seed", 20261201L);
        SplittableRandom random = new SplittableRandom(seed);
        for (int i = 0; i < 10_000; i++) {
            TierCounts pages = new TierCounts(random.nextInt(0, 5_000), random.nextInt(0, 5_000), random.nextInt(0, 5_000));
            long amount = random.nextLong(0, 1L << 30);
            TierCounts parts = pages.split(amount);
            assertThat(parts.total()).as("seed %d, %s of %d", seed, pages, amount).isEqualTo(amount);
            if (pages.total() == 0) continue;
            for (Tier t : Tier.values()) {
                double share = (double) amount * pages.get(t) / pages.total();
                assertThat(parts.get(t)).as("seed %d, %s of %d, tier %s", seed, pages, amount, t)
                        .isBetween((long) Math.floor(share), (long) Math.ceil(share) + 2);
            }
        }
    }
}
