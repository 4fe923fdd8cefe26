package io.orbitkv.bench.serve;

import io.orbitkv.testkit.ProcessTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A tiny serving run end to end: two llama.cpp engine processes on the CI model, concurrency 2,
 * all three arms, a real Manager for the OrbitKV arm. Every request an engine-local or OrbitKV
 * engine served must have bit-identical logits to the cold arm's for the same request (greedy
 * decoding of the same prompt), both cache arms must actually have restored pages, the same
 * requests must be cancelled in every arm, and after every cell the Manager's leases and
 * reservations (and the engine-local pins) must be back to 0.
 */
@ProcessTest
class ServeBenchTest {

    @TempDir
    Path tmp;

    @Test
    void cacheArmsRestoreBitIdenticalToColdAndCancelledRequestsReturnTheirLeases() throws Exception {
        Map<String, String> o = new HashMap<>(Map.of("model", "ci", "working-sets", "tiny", "engines", "2",
                "concurrency", "2", "engine-kv", "64k", "dram", "256k", "ssd", "4m"));
        o.put("out", tmp.resolve("out").toString());
        o.put("work", tmp.resolve("work").toString());
        o.put("shm", "/dev/shm/orbitkv-serve-test-" + ProcessHandle.current().pid());
        ServeBench.Config config = ServeBench.config(o);
        int[] progressCalls = new int[1];
        ServeBench.Outcome outcome = ServeBench.run(config, System.err, soFar -> {
            progressCalls[0]++;
            assertThat(soFar.cells()).hasSize(progressCalls[0]);
        });
        assertThat(progressCalls[0]).isEqualTo(3);

        assertThat(outcome.cells()).extracting(ServeBench.Cell::arm).containsExactlyInAnyOrderElementsOf(config.arms());
        assertThat(outcome.mismatched()).as("restored requests whose logits differ from cold").isZero();
        int requests = config.workingSets().getFirst().requests().size();
        long servedPerCacheArm = outcome.cells().getFirst().results().stream().filter(EnginePool.Result::served).count();
        assertThat(outcome.compared()).isEqualTo(2 * (int) servedPerCacheArm);
        assertThat(outcome.leasesDrained()).isTrue();
        Set<Integer> cancelledInCold = null;
        for (ServeBench.Cell c : outcome.cells()) {
            assertThat(c.results()).hasSize(requests);
            assertThat(c.leasesAfter()).as(c.arm() + " leases after the cell").isZero();
            Set<Integer> cancelled = c.results().stream().filter(r -> !r.served()).map(r -> r.request().id())
                    .collect(Collectors.toSet());
            assertThat(cancelled).as("cancelled requests in " + c.arm()).isNotEmpty();
            if (cancelledInCold == null) cancelledInCold = cancelled;
            assertThat(cancelled).isEqualTo(cancelledInCold);
            long restored = ServeReport.restored(c, "DRAM") + ServeReport.restored(c, "STAGED");
            if (c.arm() == ServeArm.COLD) assertThat(restored).isZero();
            else assertThat(restored).as(c.arm() + " restored tokens").isPositive();
        }
        ServeBench.Cell orbit = outcome.cells().stream().filter(c -> c.arm() == ServeArm.ORBITKV).findFirst().orElseThrow();
        assertThat(orbit.ssdWriteBytes()).as("write-through reached the SSD tier").isPositive();

        String md = ServeReport.write(config, outcome, "n/a", "n/a", 1);
        assertThat(md).contains("| tiny | OrbitKV | 2 |").contains("0 differ");
        for (String f : List.of("serve.md", "serve-cells.csv", "serve-requests.csv", "serve-ttft-tiny.png")) {
            assertThat(Files.size(config.out().resolve(f))).as(f).isPositive();
        }
    }
}
