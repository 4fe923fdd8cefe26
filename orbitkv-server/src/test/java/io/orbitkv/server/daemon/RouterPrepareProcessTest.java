package io.orbitkv.server.daemon;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.PublishOutcome;
import io.orbitkv.router.MeasuredCosts;
import io.orbitkv.router.Policy;
import io.orbitkv.router.RouterSettings;
import io.orbitkv.router.daemon.RouterDaemon;
import io.orbitkv.router.daemon.WorkerEndpoint;
import io.orbitkv.server.cluster.ClusterChannels;
import io.orbitkv.server.cluster.ClusterSecurity;
import io.orbitkv.server.cluster.GrpcPrepareTransport;
import io.orbitkv.server.daemon.PeerProcessTest.Prefix;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.testkit.EtcdServer;
import io.orbitkv.testkit.ManagerProcess;
import io.orbitkv.testkit.ProcessTest;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The router prepares the worker it picked: one clustered Manager process (a real etcd) restarted
 * over its SSD store, so a published prefix is on SSD only, and the router (in this JVM) with one
 * worker whose Manager it is. A {@code /route} sends the Manager a remote prepare over the cluster
 * plane with the worker's queue wait as first use; the prefix is staged into DRAM, and the
 * engine's QUERY (another connection than any that prepared) is FINAL at once with the whole
 * prefix and its bytes, where an unprepared prefix is staged (PENDING). A request naming a
 * namespace no engine registered is NOT_REGISTERED and stages nothing; the speculation budget is
 * back at 0 after consumption.
 */
@ProcessTest
class RouterPrepareProcessTest {

    @TempDir
    Path dir;

    @Test
    void aRoutedRequestsPrefixIsStagedOnTheChosenWorkersManagerBeforeItsFirstQuery() throws Exception {
        Path token = Managers.clusterToken(dir);
        ClusterSecurity security = ClusterSecurity.fromTokenFile("test", token, Optional.empty());
        Namespace ns = new Namespace("routed-prepare", "r1", "sha256:w", "sha256:t", "", "bf16", "nhd",
                PeerProcessTest.PAGE_TOKENS, 1, 0, 1, 0, 1);
        RecoveryContract contract = new RecoveryContract(PeerProcessTest.PAGE_TOKENS, List.of(new StateGroup.Full(0)));
        Prefix prepared = Prefix.of(ns, 12, 32 * 1024, 31);
        Prefix unprepared = Prefix.of(ns, 12, 32 * 1024, 32);
        try (EtcdServer etcd = EtcdServer.start(dir)) {
            String[] member = Managers.clusterOptions(etcd.endpoint(), "a", token);
            String[] writeThrough = java.util.stream.Stream.concat(java.util.Arrays.stream(member),
                    java.util.stream.Stream.of("--ssd-policy", "write-through")).toArray(String[]::new);
            try (ManagerProcess m = Managers.start(dir.resolve("a"), writeThrough)) {
                try (OrbitKvClient c = OrbitKvClient.connect(ManagerProcess.socket(m.dir()), Duration.ofSeconds(20))) {
                    c.register("engine-a", 1, ns, contract);
                    assertThat(c.publish(prepared.toPublish())).containsOnly(PublishOutcome.SEALED);
                    assertThat(c.publish(unprepared.toPublish())).containsOnly(PublishOutcome.SEALED);
                }
                await("every page on SSD").atMost(Duration.ofSeconds(20)).until(() -> m.metrics().lines()
                        .filter(l -> l.startsWith("orbitkv_publish_ssd_written_total") && l.contains("result=\"committed\""))
                        .mapToDouble(l -> Double.parseDouble(l.substring(l.lastIndexOf(' ') + 1))).sum() >= 24);
                assertThat(m.terminate()).isZero();
            }
            try (ManagerProcess m = Managers.start(dir.resolve("a"), member);
                 OrbitKvClient engine = OrbitKvClient.connect(ManagerProcess.socket(m.dir()), Duration.ofSeconds(20))) {
                Managers.awaitMembers(List.of(m), 1);
                engine.register("engine-a", 2, ns, contract);
                // events from nowhere: the worker stays untrusted and is routed to by load (it is the only one)
                WorkerEndpoint worker = WorkerEndpoint.parse("name=a,topic=engine-a,events=tcp://127.0.0.1:9,manager="
                        + m.clusterEndpoint() + ",namespace=" + HexFormat.of().formatHex(ns.digest()));
                RouterSettings settings = RouterSettings.defaults(MeasuredCosts.forBlocks(PeerProcessTest.PAGE_TOKENS));
                try (RouterDaemon router = RouterDaemon.start(new RouterDaemon.Options("127.0.0.1", 0, List.of(worker),
                        Policy.named("joint"), settings, null, new GrpcPrepareTransport(new ClusterChannels(security))))) {
                    HttpClient http = HttpClient.newHttpClient();
                    String base = "http://127.0.0.1:" + router.port();

                    // a namespace no engine registered here: nothing is staged
                    String other = "ab".repeat(32);
                    post(http, base + "/route", route(prepared, ", \"namespace\": \"" + other + "\""));
                    await("not_registered counted").atMost(Duration.ofSeconds(20))
                            .until(() -> routerCount(http, base, "not_registered") == 1);
                    assertThat(m.metric("orbitkv_manager_prepared_pages_held")).isZero();

                    long routed = System.nanoTime();
                    JsonNode d = post(http, base + "/route", route(prepared, ""));
                    long answered = System.nanoTime();
                    assertThat(d.get("worker").asText()).isEqualTo("a");
                    await("the prepared prefix landed").atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(5))
                            .until(() -> m.metric("orbitkv_manager_prepared_pages_held") == 12);
                    long landed = System.nanoTime();
                    assertThat(routerCount(http, base, "accepted")).isEqualTo(1);
                    assertThat(m.metric("orbitkv_manager_remote_prepares_total{outcome=\"accepted\"")).isEqualTo(1);

                    // warm the connection's QUERY path with a miss (nothing staged), so both timings below are warm
                    Reply.QueryResult miss = engine.awaitSettled(engine.query(Prefix.of(ns, 12, 32 * 1024, 99).query(9)));
                    assertThat(miss.hit()).isFalse();
                    engine.release(miss.operationId());
                    long w0 = System.nanoTime();
                    Reply.QueryResult warm = engine.query(prepared.query(1));
                    long warmNanos = System.nanoTime() - w0;
                    assertThat(warm.status()).as("FINAL at once, no staging").isEqualTo(QueryStatus.FINAL);
                    assertThat(warm.boundaryTokens()).isEqualTo(prepared.fullBoundary());
                    assertThat(PeerProcessTest.assertSameBytes(engine, warm, prepared)).isEqualTo(12);
                    engine.release(warm.operationId());

                    long c0 = System.nanoTime();
                    Reply.QueryResult cold = engine.query(unprepared.query(2));
                    assertThat(cold.status()).as("an unprepared prefix is staged from SSD").isEqualTo(QueryStatus.PENDING);
                    Reply.QueryResult coldSettled = engine.awaitSettled(cold);
                    long coldNanos = System.nanoTime() - c0;
                    assertThat(coldSettled.boundaryTokens()).isEqualTo(unprepared.fullBoundary());
                    engine.release(coldSettled.operationId());
                    // one run on the shared machine: indicative, not a benchmark (docs/performance.md)
                    System.out.printf("routed prepare: /route answered in %d us; 12 SSD pages of 32 KiB held %d us after it;"
                            + " QUERY to FINAL hit: prepared %d us, unprepared %d us%n", (answered - routed) / 1000,
                            (landed - answered) / 1000, warmNanos / 1000, coldNanos / 1000);

                    await("the prepare consumed, the budget back at 0").atMost(Duration.ofSeconds(20)).until(() ->
                            m.metric("orbitkv_manager_prepared_pages_held") == 0
                                    && m.metric("orbitkv_manager_remote_prepares_live") == 0
                                    && m.metric("orbitkv_manager_speculation_held_bytes") == 0
                                    && m.metric("orbitkv_manager_speculation_inflight_bytes") == 0);
                    assertThat(routerCount(http, base, "failed")).isZero();
                }
                PeerProcessTest.awaitDrained(List.of(m));
            }
        }
    }

    @Test
    void aPrefixOnlyAPeerHoldsIsPulledToTheChosenWorkersManagerBeforeItsFirstQuery() throws Exception {
        Path token = Managers.clusterToken(dir);
        ClusterSecurity security = ClusterSecurity.fromTokenFile("test", token, Optional.empty());
        try (EtcdServer etcd = EtcdServer.start(dir);
             ClusterChannels channels = new ClusterChannels(security)) {
            // one catalog lookup decides what the prepare stages: give it room on a loaded machine
            ManagerProcess a = Managers.start(dir.resolve("a"), member(etcd, "a", token));
            ManagerProcess b = Managers.start(dir.resolve("b"), member(etcd, "b", token));
            List<ManagerProcess> all = List.of(a, b);
            try {
                Managers.awaitMembers(all, 2);
                Namespace ns = new Namespace("routed-peer-prepare", "r1", "sha256:w", "sha256:t", "", "bf16", "nhd",
                        PeerProcessTest.PAGE_TOKENS, 1, 0, 1, 0, 1);
                RecoveryContract contract = new RecoveryContract(PeerProcessTest.PAGE_TOKENS, List.of(new StateGroup.Full(0)));
                try (OrbitKvClient onA = OrbitKvClient.connect(ManagerProcess.socket(a.dir()), Duration.ofSeconds(20));
                     OrbitKvClient onB = OrbitKvClient.connect(ManagerProcess.socket(b.dir()), Duration.ofSeconds(20))) {
                    onA.register("engine-a", 1, ns, contract);
                    onB.register("engine-b", 1, ns, contract);
                    Prefix prefix = Prefix.of(ns, 12, 32 * 1024, 41);
                    assertThat(onA.publish(prefix.toPublish())).containsOnly(PublishOutcome.SEALED);
                    // asked through A, so B's own candidate cache stays cold
                    await("the catalog knows the prefix").atMost(Duration.ofSeconds(20)).until(() ->
                            ClusterProcessTest.locate(channels, a, prefix.keys()).stream().allMatch(l -> ClusterProcessTest.heldBy(l, "a")));
                    WorkerEndpoint worker = WorkerEndpoint.parse("name=b,topic=engine-b,events=tcp://127.0.0.1:9,manager="
                            + b.clusterEndpoint() + ",namespace=" + HexFormat.of().formatHex(ns.digest()));
                    RouterSettings settings = RouterSettings.defaults(MeasuredCosts.forBlocks(PeerProcessTest.PAGE_TOKENS));
                    try (RouterDaemon router = RouterDaemon.start(new RouterDaemon.Options("127.0.0.1", 0, List.of(worker),
                            Policy.named("joint"), settings, null, new GrpcPrepareTransport(new ClusterChannels(security))))) {
                        HttpClient http = HttpClient.newHttpClient();
                        String base = "http://127.0.0.1:" + router.port();
                        assertThat(post(http, base + "/route", route(prefix, "")).get("worker").asText()).isEqualTo("b");
                        try {
                            await("B pulled the prefix from A").atMost(Duration.ofSeconds(20))
                                    .until(() -> b.metric("orbitkv_manager_prepared_pages_held") == 12);
                        } catch (org.awaitility.core.ConditionTimeoutException e) {
                            throw new AssertionError("B did not hold the prefix; its counts: " + b.metrics().lines()
                                    .filter(l -> !l.startsWith("#") && (l.contains("remote_prepares") || l.contains("catalog_lookup")
                                            || l.contains("prepared_pages") || l.contains("peer") || l.contains("reservations_failed") || l.contains("speculation") || l.contains("unexpected"))).toList()
                                    + "; A: " + a.metrics().lines().filter(l -> !l.startsWith("#") && !l.endsWith(" 0.0") && (l.contains("peer") || l.contains("unexpected") || l.contains("ticket"))).toList(), e);
                        }
                        assertThat(routerCount(http, base, "accepted")).isEqualTo(1);
                    }
                    Reply.QueryResult first = onB.query(prefix.query(1));
                    assertThat(first.status()).as("B's first QUERY, not waiting for peers").isEqualTo(QueryStatus.FINAL);
                    assertThat(first.boundaryTokens()).isEqualTo(prefix.fullBoundary());
                    assertThat(PeerProcessTest.assertSameBytes(onB, first, prefix)).isEqualTo(12);
                    onB.release(first.operationId());
                    await("the prepare consumed").atMost(Duration.ofSeconds(20)).until(() ->
                            b.metric("orbitkv_manager_prepared_pages_held") == 0
                                    && b.metric("orbitkv_manager_speculation_held_bytes") == 0);
                    PeerProcessTest.awaitDrained(all);
                }
                for (ManagerProcess m : all) assertThat(m.terminate()).as("exit status of " + m.dir()).isZero();
            } finally {
                for (ManagerProcess m : all) m.close();
            }
        }
    }

    private static String[] member(EtcdServer etcd, String nodeId, Path token) {
        List<String> options = new java.util.ArrayList<>(List.of(Managers.clusterOptions(etcd.endpoint(), nodeId, token)));
        options.addAll(List.of("--set", "clusterLookupTimeoutMillis=2000"));
        return options.toArray(String[]::new);
    }

    private static String route(Prefix prefix, String extra) {
        StringBuilder hashes = new StringBuilder();
        for (byte[] h : prefix.hashes()) hashes.append(hashes.isEmpty() ? "" : ",").append('"').append(HexFormat.of().formatHex(h)).append('"');
        return "{\"prompt_tokens\": " + prefix.tokens() + extra + ", \"block_hashes\": [" + hashes + "]}";
    }

    private static JsonNode post(HttpClient http, String url, String body) throws Exception {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(url)).POST(HttpRequest.BodyPublishers.ofString(body))
                .build(), HttpResponse.BodyHandlers.ofString());
        assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
        return PeerProcessTest.JSON.readTree(r.body());
    }

    private static double routerCount(HttpClient http, String base, String outcome) throws Exception {
        String metrics = http.send(HttpRequest.newBuilder(URI.create(base + "/metrics")).build(),
                HttpResponse.BodyHandlers.ofString()).body();
        for (String line : metrics.split("\n")) {
            if (line.startsWith("orbitkv_router_prepares_total{outcome=\"" + outcome + "\"")) {
                return Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
            }
        }
        return -1;
    }
}
