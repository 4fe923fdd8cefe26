package io.orbitkv.bench.route;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.orbitkv.bench.trace.TraceReader;
import io.orbitkv.bench.trace.TraceRequest;
import io.orbitkv.router.JointPolicy;
import io.orbitkv.router.LoadOnlyPolicy;
import io.orbitkv.router.OverlapOnlyPolicy;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A small simulator run on the committed 400-request trace slice: the table is produced and sane. */
class RouteBenchTest {

    static Path slice(Path dir) throws IOException {
        Path f = dir.resolve("slice.jsonl");
        try (var in = RouteBenchTest.class.getResourceAsStream("/traces/conversation-slice.jsonl")) {
            Files.copy(in, f);
        }
        return f;
    }

    @Test
    void theBenchWritesATableForEveryPolicyWorkerCountAndPart(@TempDir Path dir) throws IOException {
        Path out = dir.resolve("out");
        List<RouteBench.Row> rows = RouteBench.run(Map.of("trace", slice(dir).toString(), "workers", "2,4",
                "parts", "first,whole", "dram-blocks", "512", "out", out.toString()));
        assertThat(rows).hasSize(2 * 2 * 3);
        for (RouteBench.Row row : rows) {
            RouteSimulation.Result r = row.result();
            assertThat(r.requests()).isEqualTo(row.part().equals("whole") ? 400 : 200);
            assertThat(r.ttftP50Ms()).isPositive().isLessThanOrEqualTo(r.ttftP99Ms());
            assertThat(r.hitRatio()).isBetween(0.0, 1.0);
            assertThat(r.localHitRatio()).isBetween(0.0, 1.0);
            assertThat(r.workImbalance()).isGreaterThanOrEqualTo(1.0).isLessThanOrEqualTo(r.workers());
            assertThat(r.utilization()).isBetween(0.0, 1.0);
            if (r.policy().equals("overlap")) {
                // overlap-only never goes where the prefix is not: a peer read only happens after an eviction race
                assertThat(r.localHitRatio()).isGreaterThan(0.9);
            }
        }
        String table = Files.readString(out.resolve("table.md"));
        assertThat(table).contains("| whole | 4 | joint |").contains("| first half | 2 | overlap |");
        assertThat(Files.readAllLines(out.resolve("results.csv"))).hasSize(1 + rows.size());
        assertThat(Files.size(out.resolve("ttft.png"))).isGreaterThan(1000);
    }

    @Test
    void withoutPeerReadsNothingMovesBetweenHostsAndWithThemLoadOnlyReadsFromPeers(@TempDir Path dir) throws IOException {
        List<TraceRequest> trace;
        try (var in = new InputStreamReader(RouteBenchTest.class.getResourceAsStream("/traces/conversation-slice.jsonl"),
                StandardCharsets.UTF_8)) {
            trace = TraceReader.read(in, "slice", 0, 400);
        }
        RouteCosts c = RouteCosts.MEASURED;
        double scale = RouteSimulation.timeScaleForLoad(trace, 4, 0.8, c);
        var noPeer = new RouteSimulation.Config(4, 512, 0, "w-tinylfu", c, scale, 2_000_000, false);
        var peer = new RouteSimulation.Config(4, 512, 0, "w-tinylfu", c, scale, 2_000_000, true);
        assertThat(RouteSimulation.run(trace, new JointPolicy(), noPeer).bytesBetweenHosts()).isZero();
        RouteSimulation.Result load = RouteSimulation.run(trace, new LoadOnlyPolicy(), peer);
        assertThat(load.bytesBetweenHosts()).isPositive();
        assertThat(load.bytesBetweenHosts() % c.bytesPerBlock()).isZero();
        // with LRU the same inputs give the same result (W-TinyLFU admits a warm candidate at random
        // now and then, Caffeine's guard against hash flooding, so it is not reproducible to the bit)
        var lru = new RouteSimulation.Config(4, 512, 0, "lru", c, scale, 2_000_000, true);
        assertThat(RouteSimulation.run(trace, new OverlapOnlyPolicy(), lru))
                .isEqualTo(RouteSimulation.run(trace, new OverlapOnlyPolicy(), lru));
    }

    @Test
    void badOptionsAreRefusedWithTheirName() {
        assertThatThrownBy(() -> RouteBench.parse(new String[] {"--wrokers=4"})).hasMessageContaining("--wrokers");
        assertThatThrownBy(() -> RouteBench.parse(new String[] {"--workers"})).hasMessageContaining("needs a value");
        assertThat(RouteBench.parse(new String[] {"--no-peer", "--workers=8"})).containsEntry("no-peer", "true")
                .containsEntry("workers", "8");
        assertThatThrownBy(() -> new RouteSimulation.Config(65, 1, 0, "lru", RouteCosts.MEASURED, 1, 0, true))
                .hasMessageContaining("1..64");
        assertThatThrownBy(() -> new RouteSimulation.Config(4, 1, 0, "fifo", RouteCosts.MEASURED, 1, 0, true))
                .hasMessageContaining("eviction");
    }
}
