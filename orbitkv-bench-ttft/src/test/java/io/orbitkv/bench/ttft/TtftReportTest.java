package io.orbitkv.bench.ttft;

import io.orbitkv.engine.HitSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

class TtftReportTest {

    @TempDir
    Path dir;

    /** Two sessions x two turns of every arm; miss = cold + 5 %, full hits 3x a 1 ms model. */
    private static TtftRun.Result result(String engine) {
        List<Sample> samples = new ArrayList<>();
        for (int t = 0; t < 2; t++) {
            for (int s = 0; s < 2; s++) {
                long cold = 100_000_000L * (t + 1);
                samples.add(new Sample(engine, Arm.COLD, s, t, 40, 40, 0, 0, HitSource.NONE, cold));
                samples.add(new Sample(engine, Arm.MISS, s, t, 40, 40, 0, 0, HitSource.NONE, cold * 105 / 100));
                samples.add(new Sample(engine, Arm.DRAM, s, t, 40, 8, 32, 2_000_000, HitSource.DRAM, 10_000_000));
                samples.add(new Sample(engine, Arm.SSD, s, t, 40, 8, 32, 2_000_000, HitSource.STAGED, 20_000_000));
                samples.add(new Sample(engine, Arm.DRAM_FULL, s, t, 33, 1, 32, 2_000_000, HitSource.DRAM, 3_000_000));
                samples.add(new Sample(engine, Arm.CROSS, s, t, 40, 8, 32, 2_000_000, HitSource.STAGED, 15_000_000));
            }
        }
        return new TtftRun.Result(engine, samples, 500_000, 33, 4e9, 65536, 16, 4, 4, 300_000, 2, 1_000_000, 4, 0);
    }

    @Test
    void theTablesHaveARowPerArmAndSayWhichTargetsWereMissed() {
        String md = TtftReport.markdown(List.of(result("A"), result("B")));
        for (Arm arm : Arm.values()) assertThat(md).contains("| A | " + arm.label + " | 4 |").contains("| B | " + arm.label + " |");
        assertThat(md).contains("| A | cold | 4 | 100.0 | 200.0 | 200.0 | 40.0 | 0.0 | 0 | NONE 4 |");
        assertThat(md).contains("| A | SSD hit | 4 | 20.0 | 20.0 | 20.0 | 8.0 | 32.0 | 1953 | STAGED 4 |");
        assertThat(md).contains("| A | cross-host hit | 4 | 15.0 | 15.0 | 15.0 | 8.0 | 32.0 | 1953 | STAGED 4 |");
        // miss +5 % > 1 %: not met; full hit 3 ms vs 0.5 ms copy + 0.5 ms step: ratio 3.00, not met
        assertThat(md).contains("+5.00 %").contains("| 3.00 (3.00) | <= 1.2 | **no** |");
        // end to end every pair is +5 %: a clear no; the QUERY alone (1 ms) is +1.000 % of the 100 ms cold p50: met
        assertThat(md).contains("[interquartile +5.0 % .. +5.0 %]").contains("| +5.00 % (+5.00 %) | <= 1 % | **no** |");
        assertThat(md).contains("| +1.000 % | <= 1 % | yes |");
    }

    @Test
    void theMissVerdictSaysWhenTheNoiseIsLargerThanTheTarget() {
        assertThat(TtftReport.missVerdict(new TtftStats.MissOverhead(12, 1.0, 1.0, 0.98, 1.005))).isEqualTo("yes");
        assertThat(TtftReport.missVerdict(new TtftStats.MissOverhead(12, 1.05, 1.05, 1.02, 1.08))).isEqualTo("**no**");
        assertThat(TtftReport.missVerdict(new TtftStats.MissOverhead(12, 0.95, 1.0, 0.80, 1.20)))
                .isEqualTo("not resolved (noise 20 %)");
    }

    @Test
    void theChartsAreWrittenAsPngFiles() throws Exception {
        List<TtftRun.Result> results = List.of(result("A"), result("B.x"));
        List<Path> files = new ArrayList<>(TtftReport.perTurnCharts(dir, results, 2));
        files.add(TtftReport.percentileChart(dir, results));
        assertThat(files).extracting(p -> p.getFileName().toString())
                .containsExactly("ttft-per-turn-a.png", "ttft-per-turn-bx.png", "ttft-percentiles.png");
        for (Path f : files) {
            byte[] head = Arrays.copyOf(Files.readAllBytes(f), 4);
            assertThat(head).containsExactly(0x89, 'P', 'N', 'G');
        }
        TtftReport.writeCsv(dir.resolve("r.csv"), results);
        assertThat(Files.readAllLines(dir.resolve("r.csv"))).hasSize(1 + 48).first().isEqualTo(Sample.CSV_HEADER);
    }
}
