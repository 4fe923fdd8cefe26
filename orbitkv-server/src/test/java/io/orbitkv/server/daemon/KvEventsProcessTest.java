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
import io.orbitkv.testkit.Environment;
import io.orbitkv.testkit.ManagerProcess;
import io.orbitkv.testkit.ProcessTest;
import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * KV events against the ecosystem's own libraries: a real Manager process with events on, two
 * engines (Java client) publishing pages into a DRAM tier too small for them, and a subscriber
 * written with Debian's {@code python3-zmq} and {@code python3-msgpack} that decodes each batch by
 * vLLM's schema. Checks: per topic the sequence starts at 0 with {@code AllBlocksCleared} and has
 * no gap; every published block is stored on {@code CPU} exactly once, on its own instance's topic;
 * the {@code CPU} removals are exactly the Manager's DRAM evictions, each after its store; a replay
 * from 0 returns the same batches, byte for byte.
 */
@ProcessTest
class KvEventsProcessTest {

    private static final Path PYTHON = Path.of("/usr/bin/python3");
    private static final int PAGE_TOKENS = 16;
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path dir;

    private static int freePort() throws Exception {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    private static boolean pythonHasZmqAndMsgpack() throws Exception {
        if (!Files.isExecutable(PYTHON)) return false;
        Process p = new ProcessBuilder(PYTHON.toString(), "-c", "import zmq, msgpack").redirectErrorStream(true).start();
        p.getInputStream().readAllBytes();
        return p.waitFor(30, TimeUnit.SECONDS) && p.exitValue() == 0;
    }

    private static Namespace namespace() {
        return new Namespace("kv-events", "r1", "sha256:w", "sha256:t", "", "bf16", "nhd", PAGE_TOKENS, 1, 0, 1, 0, 1);
    }

    /** A distinct 16-byte block hash per (engine, page). */
    private static byte[] hash(int engine, int page) {
        byte[] h = new byte[16];
        h[0] = (byte) engine;
        h[1] = (byte) (page >> 8);
        h[2] = (byte) page;
        for (int i = 3; i < h.length; i++) h[i] = (byte) (engine * 31 + page * 7 + i);
        return h;
    }

    private static double metricSum(ManagerProcess m, String prefix) {
        double sum = 0;
        for (String line : m.get("/metrics").split("\n")) {
            if (line.startsWith(prefix)) sum += Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
        }
        return sum;
    }

    @Test
    void aPythonSubscriberSeesExactlyTheStoredAndEvictedBlocksWithConsecutiveSequencesAndAReplay() throws Exception {
        Environment.require(pythonHasZmqAndMsgpack(),
                "/usr/bin/python3 with zmq and msgpack (Debian python3-zmq, python3-msgpack)");
        Path script = dir.resolve("kv_events_subscriber.py");
        try (InputStream in = KvEventsProcessTest.class.getResourceAsStream("/io/orbitkv/server/events/kv_events_subscriber.py")) {
            Files.copy(in, script);
        }
        String pub = "tcp://127.0.0.1:" + freePort();
        String replay = "tcp://127.0.0.1:" + freePort();
        Path managerDir = Files.createDirectories(dir.resolve("m"));
        // 16 MiB of 64 KiB slots: 256 pages fit, 2 x 200 are published, so DRAM must evict. on-evict:
        // under write-through, pages waiting for a slow SSD hold their slots and a publish may be
        // pushed back with NO_SPACE (docs/publish-pipeline.md); this test is about the events
        try (ManagerProcess manager = Managers.start(managerDir, "--set", "kvEventsEndpoint=" + pub,
                "--set", "kvEventsReplayEndpoint=" + replay, "--set", "ssdPolicy=on-evict")) {
            Process sub = new ProcessBuilder(PYTHON.toString(), script.toString(), pub, replay, "engine-a", "engine-b")
                    .redirectError(dir.resolve("subscriber.err").toFile()).start();
            List<JsonNode> lines = new CopyOnWriteArrayList<>();
            Thread reader = Thread.ofVirtual().start(() -> {
                try (BufferedReader r = new BufferedReader(new InputStreamReader(sub.getInputStream(), StandardCharsets.UTF_8))) {
                    for (String line; (line = r.readLine()) != null; ) lines.add(JSON.readTree(line));
                } catch (Exception e) {
                    // the subscriber ended: what it printed is checked below
                }
            });
            try (Writer toSub = new OutputStreamWriter(sub.getOutputStream(), StandardCharsets.UTF_8)) {
                await().atMost(Duration.ofSeconds(30)).until(() -> !lines.isEmpty() || !sub.isAlive());
                assertThat(lines).as("subscriber started; stderr: %s", stderr(dir)).isNotEmpty();

                Map<String, Set<String>> published = new LinkedHashMap<>();
                Namespace ns = namespace();
                RecoveryContract contract = new RecoveryContract(PAGE_TOKENS, List.of(new StateGroup.Full(0)));
                for (int engine = 0; engine < 2; engine++) {
                    String instance = engine == 0 ? "engine-a" : "engine-b";
                    Set<String> hashes = new HashSet<>();
                    try (OrbitKvClient c = OrbitKvClient.connect(ManagerProcess.socket(managerDir), Duration.ofSeconds(20))) {
                        c.register(instance, 1, ns, contract);
                        for (int batch = 0; batch < 25; batch++) {
                            List<PageToPublish> pages = new ArrayList<>();
                            for (int i = 0; i < 8; i++) {
                                int page = batch * 8 + i;
                                byte[] image = new byte[4096];
                                image[0] = (byte) page;
                                pages.add(PageToPublish.ofBlockHash(0, hash(engine, page), java.lang.foreign.MemorySegment.ofArray(image)));
                                hashes.add(HexFormat.of().formatHex(hash(engine, page)));
                            }
                            assertThat(c.publish(pages)).containsOnly(PublishOutcome.SEALED);
                        }
                    }
                    published.put(instance, hashes);
                }

                // wait until the subscriber has seen every store, and as many CPU removals as DRAM evicted
                long publishedNanos = System.nanoTime();
                await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(20)).untilAsserted(() -> {
                    assertThat(sub.isAlive()).as("subscriber alive; stderr: %s", stderr(dir)).isTrue();
                    View v = View.of(lines);
                    assertThat(v.storedCpu).isEqualTo(published);
                    assertThat((double) v.removedCpuCount()).isEqualTo(metricSum(manager, "orbitkv_dram_evictions_total"));
                });
                long seenMillis = (System.nanoTime() - publishedNanos) / 1_000_000;
                double evictions = metricSum(manager, "orbitkv_dram_evictions_total");
                assertThat(evictions).as("the DRAM tier evicted").isGreaterThanOrEqualTo(400 - 256);

                View v = View.of(lines);
                for (String topic : published.keySet()) {
                    List<JsonNode> batches = v.batches.get(topic);
                    for (int i = 0; i < batches.size(); i++) {
                        assertThat(batches.get(i).get("seq").asLong()).as("%s batch %d", topic, i).isEqualTo(i);
                    }
                    assertThat(batches.getFirst().get("events").get(0).get("type").asText()).isEqualTo("AllBlocksCleared");
                    assertThat(v.removedCpu.get(topic)).as("removed blocks of %s were published there", topic)
                            .isSubsetOf(published.get(topic));
                    assertThat(v.storedSsd.getOrDefault(topic, Set.of())).isSubsetOf(published.get(topic));
                }
                assertThat(v.errors).as("each block removed after it was stored, once").isEmpty();
                assertThat(v.firstStored.get("block_size").asInt()).isEqualTo(PAGE_TOKENS);
                assertThat(v.firstStored.get("parent").isNull()).isTrue();
                assertThat(v.firstStored.get("tokens").isEmpty()).isTrue();
                double nowSeconds = System.currentTimeMillis() / 1000.0;
                for (List<JsonNode> batches : v.batches.values()) {
                    for (JsonNode b : batches) assertThat(b.get("ts").asDouble()).isBetween(nowSeconds - 120, nowSeconds + 1);
                }
                System.out.printf("kv-events: %d batches, %d CPU stores, %d CPU removals (= %.0f DRAM evictions), "
                        + "%d replayed to repair gaps; all seen %d ms after the last publish returned%n",
                        v.batches.values().stream().mapToInt(List::size).sum(),
                        v.storedCpu.values().stream().mapToInt(Set::size).sum(), v.removedCpuCount(), evictions,
                        lines.stream().filter(l -> l.path("replayed").asBoolean()).count(), seenMillis);

                // an explicit replay from 0 returns every batch of each topic, byte-identical
                int before = lines.size();
                toSub.write("REPLAY\n");
                toSub.flush();
                await().atMost(Duration.ofSeconds(30)).until(() -> lines.stream().skip(before).filter(l -> l.has("replay")).count() == 2);
                for (JsonNode l : lines.stream().skip(before).filter(l -> l.has("replay")).toList()) {
                    String topic = l.get("replay").asText();
                    assertThat(l.get("identical").asBoolean()).as("replay of %s identical", topic).isTrue();
                    assertThat(l.get("count").asInt()).isEqualTo(View.of(lines).batches.get(topic).size());
                }
            }
            assertThat(sub.waitFor(30, TimeUnit.SECONDS)).isTrue();
            reader.join(Duration.ofSeconds(10));
            assertThat(sub.exitValue()).as("subscriber exit; stderr: %s", stderr(dir)).isZero();
            assertThat(manager.metric("orbitkv_kv_events_dropped_total")).isZero();
            assertThat(manager.metric("orbitkv_kv_events_unnamed_total")).isZero();
            assertThat(manager.terminate()).as("exit status after SIGTERM").isZero();
            assertThat(manager.stderr()).as("Manager stderr")
                    .contains("closed the KV event endpoints " + pub).doesNotContain("Unsafe", "Exception");
        }
    }

    private static String stderr(Path dir) {
        try {
            return Files.readString(dir.resolve("subscriber.err"));
        } catch (Exception e) {
            return "(none)";
        }
    }

    /** What the subscriber's lines say, per topic, applied in sequence order. */
    private static final class View {
        final Map<String, List<JsonNode>> batches = new LinkedHashMap<>();
        final Map<String, Set<String>> storedCpu = new LinkedHashMap<>();
        final Map<String, Set<String>> storedSsd = new LinkedHashMap<>();
        final Map<String, Set<String>> removedCpu = new LinkedHashMap<>();
        final List<String> errors = new ArrayList<>();
        JsonNode firstStored;

        static View of(List<JsonNode> lines) {
            View v = new View();
            List<JsonNode> sorted = new ArrayList<>(lines.stream().filter(l -> l.has("seq")).toList());
            sorted.sort(java.util.Comparator.comparingLong(l -> l.get("seq").asLong()));
            for (JsonNode b : sorted) {
                String topic = b.get("topic").asText();
                v.batches.computeIfAbsent(topic, t -> new ArrayList<>()).add(b);
                for (JsonNode e : b.get("events")) {
                    String type = e.get("type").asText();
                    String medium = e.path("medium").asText();
                    for (JsonNode h : e.path("hashes")) {
                        String hash = h.asText();
                        if (type.equals("BlockStored") && medium.equals("CPU")) {
                            if (v.firstStored == null) v.firstStored = e;
                            if (!v.storedCpu.computeIfAbsent(topic, t -> new HashSet<>()).add(hash)) {
                                v.errors.add("stored twice on CPU: " + hash);
                            }
                        } else if (type.equals("BlockStored") && medium.equals("SSD")) {
                            v.storedSsd.computeIfAbsent(topic, t -> new HashSet<>()).add(hash);
                        } else if (type.equals("BlockRemoved") && medium.equals("CPU")) {
                            if (!v.storedCpu.getOrDefault(topic, Set.of()).contains(hash)) v.errors.add("removed before stored: " + hash);
                            if (!v.removedCpu.computeIfAbsent(topic, t -> new HashSet<>()).add(hash)) {
                                v.errors.add("removed twice from CPU: " + hash);
                            }
                        }
                    }
                }
            }
            return v;
        }

        long removedCpuCount() {
            return removedCpu.values().stream().mapToLong(Set::size).sum();
        }
    }
}
