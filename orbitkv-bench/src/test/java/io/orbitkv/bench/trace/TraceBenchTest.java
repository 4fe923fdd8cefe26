package io.orbitkv.bench.trace;

import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

class TraceBenchTest {

    @Test
    void optionsTakeEitherFormAndRepeat() {
        Map<String, List<String>> o = TraceBench.parse(new String[] {"--trace=a.jsonl", "--requests", "10",
            "--manager-set=ssdIoThreads=2", "--manager-set", "ssdFiles=2", "--simulate-only"});
        assertThat(o.get("trace")).containsExactly("a.jsonl");
        assertThat(o.get("requests")).containsExactly("10");
        assertThat(o.get("manager-set")).containsExactly("ssdIoThreads=2", "ssdFiles=2");
        assertThat(o.get("simulate-only")).containsExactly("true");
    }

    @Test
    void countersAreSummedAndSplitByReasonFromPrometheusText() {
        String metrics = """
                # HELP orbitkv_publish_ssd_skipped_total SSD writes skipped
                # TYPE orbitkv_publish_ssd_skipped_total counter
                orbitkv_publish_ssd_skipped_total{arena="manager",reason="already_stored"} 33988.0
                orbitkv_publish_ssd_skipped_total{arena="manager",reason="over_rate"} 0.0
                orbitkv_publish_ssd_skipped_total{arena="manager",reason="queue_full"} 12.0
                orbitkv_publish_ssd_skipped_totals_other 5.0
                orbitkv_dram_evictions_total{cause="policy"} 222900.0
                """;
        assertThat(TraceBench.counterSum(metrics, "orbitkv_publish_ssd_skipped_total")).isEqualTo(34000);
        assertThat(TraceBench.byReason(metrics, "orbitkv_publish_ssd_skipped_total"))
                .isEqualTo("33988 already_stored, 12 queue_full");
        assertThat(TraceBench.byReason(metrics, "orbitkv_publish_ssd_dropped_total")).isEqualTo("0");
        assertThat(TraceBench.counterSum(metrics, "orbitkv_dram_evictions_total")).isEqualTo(222900);
    }

    @Test
    void capacitiesRoundToWholeBlocksAndNeverReachZero() {
        assertThat(TraceBench.blocksOf(182_790, 5)).isEqualTo(9140);
        assertThat(TraceBench.blocksOf(182_790, 25)).isEqualTo(45_698);
        assertThat(TraceBench.blocksOf(10, 1)).isEqualTo(1);
    }
}
