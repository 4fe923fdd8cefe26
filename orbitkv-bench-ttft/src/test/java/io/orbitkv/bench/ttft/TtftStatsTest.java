package io.orbitkv.bench.ttft;

import io.orbitkv.engine.HitSource;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

class TtftStatsTest {

    private static Sample sample(Arm arm, int session, int turn, long ttftNanos, long restoredBytes) {
        int restored = restoredBytes == 0 ? 0 : 32;
        HitSource source = restored == 0 ? HitSource.NONE : HitSource.DRAM;
        return new Sample("E", arm, session, turn, 40, 40 - restored, restored, restoredBytes, source, ttftNanos);
    }

    @Test
    void percentilesAreNearestRankSoNoValueIsInvented() {
        double[] v = {10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
        assertThat(TtftStats.percentile(v, 50)).isEqualTo(5);
        assertThat(TtftStats.percentile(v, 95)).isEqualTo(10);
        assertThat(TtftStats.percentile(v, 99)).isEqualTo(10);
        assertThat(TtftStats.percentile(v, 10)).isEqualTo(1);
        assertThat(TtftStats.percentile(new double[] {3}, 50)).isEqualTo(3);
    }

    @Test
    void theMissOverheadComparesEachRequestWithItsOwnColdPair() {
        List<Sample> samples = new ArrayList<>();
        // cold TTFTs differ 10x between turns; each miss is exactly 2 % slower than its pair
        for (int s = 0; s < 3; s++) {
            for (int t = 0; t < 3; t++) {
                long cold = 1_000_000L * (t == 0 ? 10 : 100) * (s + 1);
                samples.add(sample(Arm.COLD, s, t, cold, 0));
                samples.add(sample(Arm.MISS, s, t, cold * 102 / 100, 0));
            }
        }
        TtftStats.MissOverhead m = TtftStats.missOverhead("E", samples);
        assertThat(m.pairs()).isEqualTo(9);
        assertThat(m.percent()).isCloseTo(2.0, within(1e-9));
        assertThatThrownBy(() -> TtftStats.missOverhead("other", samples)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void theHitModelIsCopyTimePlusOneStep() {
        // 1 GB/s: 4 MB take 4 ms; step 1 ms; measured 6 ms and 5 ms -> ratios 1.2 and 1.0
        List<Sample> samples = List.of(sample(Arm.DRAM_FULL, 0, 0, 6_000_000, 4_000_000),
                sample(Arm.DRAM_FULL, 1, 0, 5_000_000, 4_000_000), sample(Arm.DRAM, 0, 0, 99_000_000, 4_000_000));
        TtftStats.HitModel h = TtftStats.hitModel("E", samples, 1e9, 1_000_000);
        assertThat(h.requests()).isEqualTo(2);
        assertThat(h.medianModelMs()).isCloseTo(5.0, within(1e-9));
        assertThat(h.p50Ratio()).isCloseTo(1.0, within(1e-9));
        assertThat(h.p95Ratio()).isCloseTo(1.2, within(1e-9));
    }

    @Test
    void aSummaryCountsOnlyItsArmAndWhereHitsCameFrom() {
        List<Sample> samples = List.of(sample(Arm.DRAM, 0, 0, 3_000_000, 0), sample(Arm.DRAM, 1, 0, 1_000_000, 8192),
                sample(Arm.DRAM, 2, 0, 2_000_000, 8192), sample(Arm.COLD, 0, 0, 50_000_000, 0));
        TtftStats.ArmSummary a = TtftStats.summary("E", Arm.DRAM, samples);
        assertThat(a.requests()).isEqualTo(3);
        assertThat(a.p50Ms()).isEqualTo(2.0);
        assertThat(a.p99Ms()).isEqualTo(3.0);
        assertThat(a.sources()).containsEntry(HitSource.NONE, 1).containsEntry(HitSource.DRAM, 2);
        assertThat(a.restoredBytesPerRequest()).isCloseTo(8192 * 2 / 3.0, within(1e-9));
    }
}
