package io.orbitkv.server.daemon;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.PageToPublish;
import io.orbitkv.client.PublishOutcome;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.TokenChain;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.Hashes;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import io.orbitkv.testkit.ManagerProcess;
import io.orbitkv.testkit.ProcessTest;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * PREPARE through the public protocol with the Java client, against a real Manager process
 * restarted over its SSD store (so the published prefixes are on SSD only): a prepared prefix is
 * answered FINAL from DRAM by the QUERY that takes the prepare's id over, where an unprepared one
 * is staged (PENDING); the speculation budget is back at 0 after consumption, a cancel and a
 * closed connection; {@code /status} counts what the prepares bought.
 */
@ProcessTest
class PrepareProcessTest {

    private static final int PAGE_TOKENS = 16;
    private static final int PAGES = 16;
    private static final int PAGE_BYTES = 32 * 1024;
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path dir;

    private static Namespace namespace() {
        return new Namespace("prepare-model", "r1", "sha256:w", "sha256:t", "", "bf16", "nhd", PAGE_TOKENS, 1, 0, 1, 0, 1);
    }

    private OrbitKvClient client(String instance, long epoch) throws Exception {
        OrbitKvClient c = OrbitKvClient.connect(ManagerProcess.socket(dir), Duration.ofSeconds(20));
        c.register(instance, epoch, namespace(), new RecoveryContract(PAGE_TOKENS, List.of(new StateGroup.Full(0))));
        return c;
    }

    /** The block hashes of prompt {@code seed} ({@value #PAGES} full pages plus one token). */
    private static List<byte[]> hashes(int seed) {
        int[] tokens = new int[PAGES * PAGE_TOKENS + 1];
        for (int i = 0; i < tokens.length; i++) tokens[i] = seed * 10_000 + i;
        return List.of(TokenChain.pageHashes(namespace().digest(), tokens, PAGE_TOKENS, new byte[0]));
    }

    private static List<PageToPublish> pages(int seed) {
        List<PageToPublish> out = new ArrayList<>();
        List<byte[]> h = hashes(seed);
        for (int p = 0; p < h.size(); p++) {
            byte[] b = new byte[PAGE_BYTES];
            for (int j = 0; j < b.length; j++) b[j] = (byte) (seed + p * 7 + j);
            out.add(PageToPublish.ofBlockHash(0, h.get(p), MemorySegment.ofArray(b)));
        }
        return out;
    }

    private static Request.Query query(long op, int seed) {
        return new Request.Query(op, 0, CompletionTarget.HOST_READY, PAGES * PAGE_TOKENS + 1, 0,
                List.of(new Request.QueryGroup(0, KeyForm.BLOCK_HASH, Hashes.of(hashes(seed)))));
    }

    private static void awaitBudgetBack(ManagerProcess m) {
        await("the speculation budget is back at 0").atMost(Duration.ofSeconds(20)).until(() ->
                m.metric("orbitkv_manager_speculation_held_bytes") == 0
                        && m.metric("orbitkv_manager_speculation_inflight_bytes") == 0
                        && m.metric("orbitkv_manager_prepares") == 0);
    }

    /**
     * QUERY to FINAL hit, once the connection is warm: prefixes 5 and 7 prepared (and landed),
     * 6 and 8 not; printed for docs/performance.md (one run: indicative, not a benchmark).
     */
    private static void measure(ManagerProcess m, OrbitKvClient c) {
        long[] prepared = new long[2];
        long[] unprepared = new long[2];
        for (int i = 0; i < 2; i++) {
            int seed = 5 + 2 * i;
            c.prepare(query(seed, seed), 0, 1);
            await().atMost(Duration.ofSeconds(20)).until(() -> m.metric("orbitkv_manager_prepared_pages_held") == PAGES);
            long t0 = System.nanoTime();
            assertThat(c.awaitSettled(c.query(query(seed, seed))).hit()).isTrue();
            prepared[i] = System.nanoTime() - t0;
            c.release(seed);
            long t1 = System.nanoTime();
            assertThat(c.awaitSettled(c.query(query(seed + 1, seed + 1))).hit()).isTrue();
            unprepared[i] = System.nanoTime() - t1;
            c.release(seed + 1);
        }
        System.out.printf("prepare: QUERY to FINAL hit of %d pages of %d KiB: prepared %d, %d us; unprepared %d, %d us%n",
                PAGES, PAGE_BYTES >> 10, prepared[0] / 1000, prepared[1] / 1000, unprepared[0] / 1000, unprepared[1] / 1000);
    }

    @Test
    void aPreparedPrefixIsServedFromDramAndEveryByteReturnsToTheBudget() throws Exception {
        int[] seeds = {1, 2, 3, 4, 5, 6, 7, 8};
        try (ManagerProcess m = Managers.start(dir, "--ssd-policy", "write-through")) {
            try (OrbitKvClient c = client("engine-p", 1)) {
                for (int seed : seeds) assertThat(c.publish(pages(seed))).containsOnly(PublishOutcome.SEALED);
            }
            await().atMost(Duration.ofSeconds(20)).until(() -> m.metric("orbitkv_ssd_writes_total") >= 4 * PAGES);
            assertThat(m.terminate()).isZero();
        }
        try (ManagerProcess m = Managers.start(dir)) {
            try (OrbitKvClient c = client("engine-p", 2)) {
                // prepared: staged from SSD while "queued", then the QUERY is a DRAM hit at once
                Reply.Prepared prepared = c.prepare(query(1, 1), 0, 9);
                assertThat(prepared.outcome()).isEqualTo(Reply.PrepareOutcome.ACCEPTED);
                assertThat(prepared.pagesToStage()).isEqualTo(PAGES);
                assertThat(c.stats()).as("a prepare leases nothing to the engine").containsEntry("leases", 0L);
                await("the prepared pages landed").atMost(Duration.ofSeconds(20))
                        .until(() -> m.metric("orbitkv_manager_prepared_pages_held") == PAGES);
                Reply.QueryResult warm = c.query(query(1, 1));
                assertThat(warm.status()).as("FINAL at once, no staging").isEqualTo(QueryStatus.FINAL);
                assertThat(warm.hit()).isTrue();
                assertThat(warm.boundaryTokens()).isEqualTo((long) PAGES * PAGE_TOKENS);
                c.release(1);

                // unprepared: the same kind of demand is staged from SSD first
                Reply.QueryResult cold = c.query(query(2, 2));
                assertThat(cold.status()).isEqualTo(QueryStatus.PENDING);
                assertThat(c.awaitSettled(cold).hit()).isTrue();
                c.release(2);
                awaitBudgetBack(m);
                measure(m, c);

                // a prepare whose first use is far off waits; CANCEL gives everything back at once
                Reply.Prepared later = c.prepare(query(3, 3), 30_000, 1);
                assertThat(later.startDelayMillis()).isGreaterThan(20_000);
                assertThat(c.cancel(3).drained()).isTrue();
                awaitBudgetBack(m);
            }
            // a connection that closes with prepared pages held lets them go
            try (OrbitKvClient dying = client("engine-q", 1)) {
                assertThat(dying.prepare(query(4, 4), 0, 5).pagesToStage()).isEqualTo(PAGES);
                await().atMost(Duration.ofSeconds(20)).until(() -> m.metric("orbitkv_manager_prepared_pages_held") == PAGES);
            }
            awaitBudgetBack(m);

            JsonNode prepare = JSON.readTree(m.get("/status")).get("prepare");
            JsonNode ns = prepare.get("namespaces").get(0);
            assertThat(ns.get("consumed").asLong()).isEqualTo(3L * PAGES);
            assertThat(ns.get("releasedUnused").asLong()).isEqualTo(PAGES);
            assertThat(ns.get("preparedSsd").asLong()).isEqualTo(4L * PAGES);
            assertThat(prepare.get("heldBytes").asLong()).isZero();
            assertThat(m.terminate()).isZero();
        }
    }
}
