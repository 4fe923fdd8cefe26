package io.orbitkv.bench.trace;

import io.orbitkv.bench.BenchManager;
import com.fasterxml.jackson.databind.JsonNode;
import io.orbitkv.core.storage.dram.DramEviction;
import io.orbitkv.testkit.ManagerProcess;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.net.URISyntaxException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The trace replay against a real Manager process, on the committed slice of the conversation
 * trace (or any Mooncake-format file named by {@code -Dorbitkv.trace.file=...}): every restored
 * byte is checked, and the hits must be the ones the simulators compute.
 */
class TraceReplayTest {

    private static final int BLOCK_BYTES = 4096;
    private static final int BLOCK_TOKENS = 512;

    @TempDir
    Path dir;

    /** The committed slice: the first 400 requests of the Mooncake conversation trace (Apache-2.0, see its README). */
    static Path slice() {
        String override = System.getProperty("orbitkv.trace.file");
        if (override != null && !override.isBlank()) return Path.of(override);
        try {
            return Path.of(TraceReplayTest.class.getResource("/traces/conversation-slice.jsonl").toURI());
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    private ManagerProcess start(long dramBlocks, DramEviction eviction, int concurrency, int maxBlocks) throws Exception {
        long staging = Math.max(4L << 20, 2L * concurrency * maxBlocks * BLOCK_BYTES);
        long dramBytes = ManagerCapacity.dramBytesFor(dramBlocks, BLOCK_BYTES, staging);
        return BenchManager.start(dir.resolve("manager"), dir.resolve("dram"), "256m", List.of(
                "--dram-bytes", String.valueOf(dramBytes), "--set", "dramSlotBytes=" + BLOCK_BYTES,
                "--set", "stagingBytes=" + staging, "--set", "ssdFiles=1",
                "--set", "dramEviction=" + eviction.word(),
                "--ssd-bytes", String.valueOf(ManagerCapacity.MIN_SSD_BYTES),
                "--ssd-policy", "reuse-aware:" + Integer.MAX_VALUE));
    }

    private TraceReplay.Options options(int concurrency, double speedup) {
        // inside the Manager's shm directory, its region directory (ManagerProcess)
        return new TraceReplay.Options(BLOCK_TOKENS, BLOCK_BYTES, speedup, concurrency, dir.resolve("dram/regions"),
                Duration.ofSeconds(60));
    }

    @Test
    void withRoomForEveryBlockTheManagerServesExactlyTheUnboundedHits() throws Exception {
        List<TraceRequest> trace = TraceReader.read(slice(), 0, Integer.MAX_VALUE);
        int unique = PrefixSimulator.uniqueBlocks(trace);
        int maxBlocks = trace.stream().mapToInt(TraceRequest::blocks).max().orElseThrow();
        PrefixSimulator.Result expected = PrefixSimulator.run(trace, new LruPolicy(unique), BLOCK_TOKENS);
        TraceReplay.Result r;
        JsonNode status;
        try (ManagerProcess m = start(unique, DramEviction.W_TINY_LFU, 1, maxBlocks)) {
            r = TraceReplay.run(m.socket(), trace, options(1, 0));
            status = BenchManager.status(m);
            m.stop();
        }
        assertThat(r.wrongBytes()).as("restored bytes that differ from what was published").isZero();
        assertThat(r.wrongPages()).isZero();
        List<Integer> got = new ArrayList<>();
        for (int i = 0; i < trace.size(); i++) got.add(r.hitBlocksOf(i));
        assertThat(got).as("hit blocks per request").containsExactlyElementsOf(toList(expected.hitBlocks()));
        assertThat(r.hitTokens()).isEqualTo(expected.hitTokens()).isPositive();
        assertThat(r.promptTokens()).isEqualTo(expected.promptTokens());
        assertThat(r.restoredBytes()).isEqualTo(expected.hitBlockReferences() * BLOCK_BYTES);
        assertThat(r.publishedBlocks()).as("each distinct block sealed exactly once").isEqualTo(unique);
        assertThat(r.publishRefused()).isZero();
        assertThat(r.ssdHitBlocks()).isZero();
        assertThat(TraceBench.residentPages(status)).isEqualTo(unique);
        assertThat(r.query().getTotalCount()).isEqualTo(trace.size());
    }

    @Test
    void atATenthOfTheBlocksLruEvictionMatchesTheLruSimulatorAndStaysWithinItsCapacity() throws Exception {
        List<TraceRequest> trace = TraceReader.read(slice(), 0, Integer.MAX_VALUE);
        int unique = PrefixSimulator.uniqueBlocks(trace);
        int capacity = unique / 10;
        int maxBlocks = trace.stream().mapToInt(TraceRequest::blocks).max().orElseThrow();
        PrefixSimulator.Result lru = PrefixSimulator.run(trace, new LruPolicy(capacity), BLOCK_TOKENS);
        PrefixSimulator.Result unbounded = PrefixSimulator.run(trace, new LruPolicy(unique), BLOCK_TOKENS);
        TraceReplay.Result r;
        JsonNode status;
        // Paced at 1,000× the trace's time with two connections, as bin/bench-trace replays.
        try (ManagerProcess m = start(capacity, DramEviction.LRU, 2, maxBlocks)) {
            r = TraceReplay.run(m.socket(), trace, options(2, 1000));
            status = BenchManager.status(m);
            m.stop();
        }
        assertThat(r.wrongBytes()).isZero();
        assertThat(TraceBench.residentPages(status)).as("pages the Manager holds").isEqualTo(capacity);
        assertThat(r.hitRatio()).isPositive().isLessThan(unbounded.hitRatio());
        assertThat(r.hitRatio()).as("Manager (LRU) vs the LRU simulator: %s vs %s", r.hitRatio(), lru.hitRatio())
                .isBetween(lru.hitRatio() - 0.01, lru.hitRatio() + 0.01);
        assertThat(r.offeredRate()).isGreaterThan(0);
        assertThat(r.achievedRate()).isGreaterThan(0);
    }

    private static List<Integer> toList(int[] a) {
        List<Integer> out = new ArrayList<>(a.length);
        for (int v : a) out.add(v);
        return out;
    }
}
