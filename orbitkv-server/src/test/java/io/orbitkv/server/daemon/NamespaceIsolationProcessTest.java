package io.orbitkv.server.daemon;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.PageToPublish;
import io.orbitkv.client.PublishOutcome;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.StateKeys;
import io.orbitkv.state.TokenChain;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.Hashes;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import io.orbitkv.testkit.ManagerProcess;
import io.orbitkv.testkit.ProcessTest;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Two namespaces holding the same key bytes, through the public protocol against a real Manager
 * process: namespace B publishes, under the STATE_KEY form, the keys the Manager derived for
 * namespace A's pages. A's pages stay resident and read back byte-identical, B's own pages are
 * added beside them (B's STATS and the SSD grow exactly as they would without A), nothing is
 * counted as displaced, and A's per-namespace retention figures do not move (docs/protocol.md 6.5).
 * A STATS reply shows only the requester's namespace: another namespace publishing, querying and
 * holding leases leaves it unchanged, while {@code /metrics} stays Manager-wide (6.8).
 */
@ProcessTest
class NamespaceIsolationProcessTest {

    private static final int PAGE_TOKENS = 16;
    private static final int PAGES = 4;
    private static final int PAGE_BYTES = 16 * 1024;
    /** The small Manager's one slot class ({@code dramSlotBytes=64k}, {@link Managers#small}). */
    private static final int SLOT_BYTES = 64 * 1024;

    @TempDir
    static Path dir;
    private static ManagerProcess manager;

    @BeforeAll
    static void start() throws Exception {
        manager = Managers.start(dir);
    }

    @AfterAll
    static void stop() throws Exception {
        assertThat(manager.terminate()).as("exit status after SIGTERM").isZero();
    }

    private static Namespace namespace(String model) {
        return new Namespace(model, "r1", "sha256:w", "sha256:t", "", "bf16", "nhd", PAGE_TOKENS, 1, 0, 1, 0, 1);
    }

    private static OrbitKvClient client(Namespace ns) throws Exception {
        OrbitKvClient c = OrbitKvClient.connect(ManagerProcess.socket(dir), Duration.ofSeconds(20));
        c.register(ns.modelId(), 1, ns, new RecoveryContract(PAGE_TOKENS, List.of(new StateGroup.Full(0))));
        return c;
    }

    private static List<MemorySegment> images(int seed) {
        List<MemorySegment> out = new ArrayList<>();
        for (int p = 0; p < PAGES; p++) {
            byte[] b = new byte[PAGE_BYTES];
            for (int j = 0; j < b.length; j++) b[j] = (byte) (seed * 31 + p * 13 + j);
            out.add(MemorySegment.ofArray(b));
        }
        return out;
    }

    /** Sum of the {@code /metrics} samples of {@code name} whose line {@code labels} accepts. */
    private static double sum(String name, Predicate<String> labels) {
        double total = 0;
        for (String line : manager.metrics().split("\n")) {
            if ((line.startsWith(name + "{") || line.startsWith(name + " ")) && labels.test(line)) {
                total += Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
            }
        }
        return total;
    }

    private static double displaced() {
        return sum("orbitkv_dram_evictions_total", l -> l.contains("cause=\"displaced\""));
    }

    /** Every {@code orbitkv_retention_*} sample of {@code namespaceHex}, line by line. */
    private static List<String> retentionOf(String namespaceHex) {
        return Arrays.stream(manager.metrics().split("\n"))
                .filter(l -> l.startsWith("orbitkv_retention_") && l.contains(namespaceHex)).sorted().toList();
    }

    /** Waits until every admitted SSD write ran and {@code written} commits happened in total. */
    private static void awaitSsdWrites(double written) {
        await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(20)).until(() ->
                sum("orbitkv_publish_ssd_written_total", l -> l.contains("result=\"committed\"")) >= written
                        && sum("orbitkv_publish_ssd_queued_bytes", l -> true) == 0);
    }

    private static Map<String, Long> withoutDramUsed(Map<String, Long> stats) {
        Map<String, Long> out = new HashMap<>(stats);
        out.remove("dram_used_bytes");
        return out;
    }

    @Test
    void stateKeyPublishesOfAnotherNamespacesKeysLeaveItsPagesCountersAndRepliesUnchanged() throws Exception {
        Namespace nsA = namespace("tenant-a");
        Namespace nsB = namespace("tenant-b");
        int[] tokens = new int[PAGES * PAGE_TOKENS + 1];
        for (int i = 0; i < tokens.length; i++) tokens[i] = 70_000 + i;
        List<byte[]> hashesA = List.of(TokenChain.pageHashes(nsA.digest(), tokens, PAGE_TOKENS, new byte[0]));
        List<MemorySegment> imagesA = images(1);
        List<MemorySegment> imagesB = images(2);
        // The keys the Manager derives for A's pages: SHA-256(digest_A ‖ group ‖ hash).
        List<StateKey> keysA = hashesA.stream().map(h -> StateKeys.forBlockHash(nsA.digest(), 0, h)).toList();

        try (OrbitKvClient a = client(nsA); OrbitKvClient b = client(nsB)) {
            double ssdCommitted0 = sum("orbitkv_publish_ssd_written_total", l -> l.contains("result=\"committed\""));
            double ssdUsed0 = sum("orbitkv_ssd_used_bytes", l -> true);
            long dramUsed0 = a.stats().get("dram_used_bytes");
            List<PageToPublish> pagesA = new ArrayList<>();
            for (int p = 0; p < PAGES; p++) pagesA.add(PageToPublish.ofBlockHash(0, hashesA.get(p), imagesA.get(p)));
            assertThat(a.publish(pagesA)).containsOnly(PublishOutcome.SEALED).hasSize(PAGES);
            awaitSsdWrites(ssdCommitted0 + PAGES);
            long dramAddedByA = a.stats().get("dram_used_bytes") - dramUsed0;
            double ssdAddedByA = sum("orbitkv_ssd_used_bytes", l -> true) - ssdUsed0;
            assertThat(dramAddedByA).as("A's pages take DRAM").isPositive();

            Map<String, Long> statsA = a.stats();
            Map<String, Long> statsB = b.stats();
            List<String> retentionA = retentionOf(nsA.digestHex());
            assertThat(retentionA).as("A's retention gauges").isNotEmpty();
            double displaced0 = displaced();
            double ssdUsed1 = sum("orbitkv_ssd_used_bytes", l -> true);

            // B publishes its own images under A's keys.
            List<PageToPublish> pagesB = new ArrayList<>();
            for (int p = 0; p < PAGES; p++) pagesB.add(PageToPublish.ofKey(0, keysA.get(p), imagesB.get(p)));
            assertThat(b.publish(pagesB)).containsOnly(PublishOutcome.SEALED).hasSize(PAGES);
            awaitSsdWrites(ssdCommitted0 + 2 * PAGES);

            // B's reply shows exactly its own bytes added, as if A did not exist.
            Map<String, Long> statsB1 = b.stats();
            assertThat(statsB1.get("dram_used_bytes") - statsB.get("dram_used_bytes"))
                    .as("DRAM bytes B's publish added").isEqualTo(dramAddedByA);
            assertThat(withoutDramUsed(statsB1)).as("B's other STATS counters").isEqualTo(withoutDramUsed(statsB));
            assertThat(sum("orbitkv_ssd_used_bytes", l -> true) - ssdUsed1)
                    .as("SSD bytes B's pages added").isEqualTo(ssdAddedByA);
            assertThat(displaced()).as("images displaced across namespaces").isEqualTo(displaced0);
            assertThat(retentionOf(nsA.digestHex())).as("A's retention gauges").isEqualTo(retentionA);
            Map<String, Long> statsA1 = a.stats();
            assertThat(withoutDramUsed(statsA1)).as("A's STATS counters").isEqualTo(withoutDramUsed(statsA));

            // A's pages are still resident and read back byte-identical; so are B's, under the same keys.
            assertReadsBack(a, 1, new Request.QueryGroup(0, KeyForm.BLOCK_HASH, Hashes.of(hashesA)), imagesA);
            assertReadsBack(b, 2, new Request.QueryGroup(0, KeyForm.STATE_KEY, Hashes.ofKeys(keysA)), imagesB);
        }
    }

    @Test
    void statsRepliesCountOnlyTheRequestersNamespace() throws Exception {
        Namespace nsC = namespace("tenant-c");
        Namespace nsD = namespace("tenant-d");
        int[] tokens = new int[PAGES * PAGE_TOKENS + 1];
        for (int i = 0; i < tokens.length; i++) tokens[i] = 90_000 + i;
        List<byte[]> hashes = List.of(TokenChain.pageHashes(nsC.digest(), tokens, PAGE_TOKENS, new byte[0]));
        List<MemorySegment> images = images(3);

        try (OrbitKvClient c = client(nsC); OrbitKvClient d = client(nsD)) {
            Map<String, Long> statsD0 = d.stats();
            assertThat(statsD0).as("D alone in its namespace, nothing done yet")
                    .containsEntry("connections", 1L).containsEntry("operations", 0L).containsEntry("leases", 0L)
                    .containsEntry("query_hits", 0L).containsEntry("pages_leased", 0L)
                    .doesNotContainKey("staging_bytes");
            Map<String, Long> statsC0 = c.stats();
            assertThat(statsC0.get("dram_capacity_bytes")).as("configuration, the same for everyone")
                    .isEqualTo(statsD0.get("dram_capacity_bytes"));
            double leases0 = sum("orbitkv_manager_leases", l -> true);

            // C publishes, queries and holds leases on its pages.
            List<PageToPublish> pages = new ArrayList<>();
            for (int p = 0; p < PAGES; p++) pages.add(PageToPublish.ofBlockHash(0, hashes.get(p), images.get(p)));
            assertThat(c.publish(pages)).containsOnly(PublishOutcome.SEALED).hasSize(PAGES);
            Reply.QueryResult hit = c.awaitSettled(c.query(new Request.Query(7, 0, CompletionTarget.HOST_READY,
                    tokens.length, 0, List.of(new Request.QueryGroup(0, KeyForm.BLOCK_HASH, Hashes.of(hashes))))));
            assertThat(hit.hit()).isTrue();

            Map<String, Long> statsC1 = c.stats();
            assertThat(statsC1).as("C's own figures").containsEntry("connections", 1L)
                    .containsEntry("operations", 1L).containsEntry("leases", (long) PAGES)
                    .containsEntry("query_hits", 1L).containsEntry("pages_leased", (long) PAGES);
            assertThat(statsC1.get("dram_used_bytes") - statsC0.get("dram_used_bytes"))
                    .as("C's resident pages, one slot each").isEqualTo((long) PAGES * SLOT_BYTES);
            assertThat(sum("orbitkv_manager_leases", l -> true) - leases0)
                    .as("the operator's view stays Manager-wide").isEqualTo(PAGES);
            assertThat(d.stats()).as("D's STATS while C holds leases").isEqualTo(statsD0);

            c.release(7);
            assertThat(c.stats()).as("C released everything").containsEntry("leases", 0L)
                    .containsEntry("operations", 0L);
            assertThat(d.stats()).as("D's STATS after C's work").isEqualTo(statsD0);
        }
    }

    private static void assertReadsBack(OrbitKvClient client, long op, Request.QueryGroup group,
                                        List<MemorySegment> images) {
        Reply.QueryResult hit = client.awaitSettled(client.query(new Request.Query(op, 0, CompletionTarget.HOST_READY,
                (long) PAGES * PAGE_TOKENS + 1, 0, List.of(group))));
        assertThat(hit.hit()).isTrue();
        assertThat(hit.boundaryTokens()).isEqualTo((long) PAGES * PAGE_TOKENS);
        List<Reply.PageResult> pages = hit.groups().getFirst().spans().stream()
                .flatMap(s -> s.pages().stream()).toList();
        assertThat(pages).hasSize(PAGES).allMatch(p -> p instanceof Reply.Resident, "resident in DRAM");
        for (int i = 0; i < PAGES; i++) {
            MemorySegment page = client.readLease(((Reply.Resident) pages.get(i)).lease());
            assertThat(page.mismatch(images.get(i))).as("page %d", i).isEqualTo(-1);
        }
        client.release(op);
    }
}
