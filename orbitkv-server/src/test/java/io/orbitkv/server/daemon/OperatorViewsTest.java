package io.orbitkv.server.daemon;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.PublishOutcome;
import io.orbitkv.client.Region;
import io.orbitkv.server.cli.OrbitKvCli;
import io.orbitkv.server.cluster.ClusterChannels;
import io.orbitkv.server.cluster.ClusterSecurity;
import io.orbitkv.testkit.EtcdServer;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.Hashes;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import io.orbitkv.testkit.ManagerProcess;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.io.TempDir;

/**
 * What an operator sees of a running cluster, end to end: two Manager processes A and B and one
 * real etcd serve a small, steady workload (publishes, DRAM hits with RESTORE and misses on A,
 * peer hits on B) while
 * <ul>
 *   <li>a real Prometheus scrapes both, and every PromQL expression of
 *       {@code docs/grafana/orbitkv.json} returns data through its HTTP API, with hit ratios per
 *       tier and latency quantiles that match the workload; {@code promtool check metrics}
 *       passes on both {@code /metrics};</li>
 *   <li>headless Chromium loads B's status page, whose DOM shows B's tiers, instance, peers,
 *       chart and a provoked authentication error; its screenshot is saved as
 *       {@code target/status-page.png};</li>
 *   <li>{@code orbitkv status} (and {@code --watch}) prints the same summary;</li>
 *   <li>the Managers log one line per event with level and component, and A, which nothing
 *       provoked, logged no warning at start-up.</li>
 * </ul>
 * The workload runs at 5 iterations a second, the cadence of a lightly loaded engine, for the
 * whole class, so rates over Prometheus' 1-minute windows are not zero.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class OperatorViewsTest {

    static final int PAGE_TOKENS = 16;
    static final int PAGE_BYTES = 16 * 1024;
    static final ObjectMapper JSON = new ObjectMapper();
    /** The dashboard, read from the docs: the test keeps no second list of its expressions. */
    static final Path DASHBOARD = Path.of("..", "docs", "grafana", "orbitkv.json");
    static final Path OPERATIONS = Path.of("..", "docs", "operations.md");
    static final Pattern LOG_LINE = Pattern.compile(
            "\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z (ERROR|WARN |INFO |DEBUG|TRACE) [A-Za-z0-9_.-]+: .+");

    @TempDir
    static Path dir;

    private EtcdServer etcd;
    private ManagerProcess a;
    private ManagerProcess b;
    private OrbitKvClient onA;
    private OrbitKvClient onB;
    private Path token;
    private final ScheduledExecutorService workload = Executors.newSingleThreadScheduledExecutor();
    private final AtomicReference<Throwable> workloadFailure = new AtomicReference<>();
    private final AtomicInteger iterations = new AtomicInteger();
    private final AtomicLong ops = new AtomicLong(1_000);
    private final AtomicLong peerHits = new AtomicLong();
    private final AtomicLong localHits = new AtomicLong();
    /** Prefixes A published, newest last; touched by the workload thread only. */
    private final List<PeerProcessTest.Prefix> published = new ArrayList<>();
    /** The first prefix, published before the workload starts (the tests read it). */
    private PeerProcessTest.Prefix first;
    private Namespace ns;
    private Region region;

    @BeforeAll
    void startClusterAndWorkload() throws Exception {
        PrometheusProcess.requireInstalled();
        Chromium.requireInstalled();
        token = Managers.clusterToken(dir);
        etcd = EtcdServer.start(dir);
        a = Managers.startMember(dir, etcd.endpoint(), "a", token);
        b = Managers.startMember(dir, etcd.endpoint(), "b", token);
        Managers.awaitMembers(List.of(a, b), 2);
        ns = new Namespace("ops-test", "r1", "sha256:w", "sha256:t", "", "bf16", "nhd", PAGE_TOKENS, 1, 0, 1, 0, 1);
        RecoveryContract contract = new RecoveryContract(PAGE_TOKENS, List.of(new StateGroup.Full(0)));
        onA = OrbitKvClient.connect(ManagerProcess.socket(a.dir()), Duration.ofSeconds(20));
        onB = OrbitKvClient.connect(ManagerProcess.socket(b.dir()), Duration.ofSeconds(20));
        onA.register("engine-a", 1, ns, contract);
        onB.register("engine-b", 1, ns, contract);
        region = onA.registerRegion(a.dir().resolve("region-a"), PAGE_BYTES, 8);
        // one prefix known to B before the steady state: the first peer hit, awaited
        first = PeerProcessTest.Prefix.of(ns, 4, PAGE_BYTES, 1);
        assertThat(onA.publish(first.toPublish())).containsOnly(PublishOutcome.SEALED);
        published.add(first);
        Reply.QueryResult hit = PeerProcessTest.awaitFullHit(onB, first, ops);
        onB.release(hit.operationId());
        workload.scheduleWithFixedDelay(this::iteration, 0, 200, TimeUnit.MILLISECONDS);
        await("the workload runs").atMost(Duration.ofSeconds(30)).until(() -> iterations.get() >= 5 || workloadFailure.get() != null);
        assertNoWorkloadFailure();
    }

    /**
     * One round of the workload: A publishes a new 4-page prefix and hits it (ENGINE_RESTORE,
     * restored into a region), A misses an unknown prefix, and B reads a prefix A published two
     * rounds ago through the peer path. Confined to the workload thread (the clients are not
     * shared with the tests).
     */
    private void iteration() {
        if (workloadFailure.get() != null) return;
        try {
            int k = iterations.incrementAndGet();
            PeerProcessTest.Prefix prefix = PeerProcessTest.Prefix.of(ns, 4, PAGE_BYTES, 100 + k);
            assertThat(onA.publish(prefix.toPublish())).containsOnly(PublishOutcome.SEALED);
            published.add(prefix);
            long op = ops.incrementAndGet();
            Reply.QueryResult local = onA.awaitSettled(onA.query(restoreQuery(op, prefix)));
            // once DRAM is full, W-TinyLFU may refuse a new page a place (it is evicted at once): a miss, not an error
            if (local.hit()) {
                localHits.incrementAndGet();
                assertThat(onA.restore(op, region, OrbitKvClient.residentPages(local, 0)).outcome()).isEqualTo(Reply.Settled.OK);
            }
            onA.release(op);
            PeerProcessTest.Prefix unknown = PeerProcessTest.Prefix.of(ns, 2, PAGE_BYTES, -k);
            Reply.QueryResult miss = onA.awaitSettled(onA.query(unknown.query(ops.incrementAndGet())));
            assertThat(miss.hit()).isFalse();
            onA.release(miss.operationId());
            PeerProcessTest.Prefix older = published.get(Math.max(0, published.size() - 3));
            Reply.QueryResult remote = onB.awaitSettled(onB.query(older.query(ops.incrementAndGet()).withPeerWaitMillis(2_000)));
            if (remote.hit()) peerHits.incrementAndGet();
            onB.release(remote.operationId());
            if (published.size() > 64) published.removeFirst();
        } catch (Throwable t) {
            workloadFailure.compareAndSet(null, t);
        }
    }

    private static Request.Query restoreQuery(long op, PeerProcessTest.Prefix p) {
        return new Request.Query(op, 0, CompletionTarget.ENGINE_RESTORE, p.tokens(), 0,
                List.of(new Request.QueryGroup(0, KeyForm.BLOCK_HASH, Hashes.of(p.hashes()))));
    }

    private void assertNoWorkloadFailure() {
        Throwable t = workloadFailure.get();
        if (t != null) throw new AssertionError("the workload failed in iteration " + iterations.get(), t);
    }

    @AfterAll
    void stop() throws Exception {
        workload.shutdownNow();
        workload.awaitTermination(30, TimeUnit.SECONDS);
        if (onA != null) onA.close();
        if (onB != null) onB.close();
        for (ManagerProcess m : new ManagerProcess[] {a, b}) {
            if (m != null) assertThat(m.terminate()).as("exit status of " + m.dir() + ": " + m.stderr()).isZero();
        }
        if (etcd != null) etcd.close();
    }

    /** Every {@code expr} in the dashboard, in panel order, keyed by "panel title / refId". */
    static Map<String, String> dashboardExpressions() throws Exception {
        Map<String, String> exprs = new LinkedHashMap<>();
        collect(JSON.readTree(DASHBOARD.toFile()), "", exprs);
        return exprs;
    }

    private static void collect(JsonNode node, String title, Map<String, String> into) {
        if (node.isObject()) {
            String here = node.has("title") ? node.get("title").asText() : title;
            if (node.has("expr")) into.put(here + " / " + node.path("refId").asText(), node.get("expr").asText());
            node.properties().forEach(e -> collect(e.getValue(), here, into));
        } else if (node.isArray()) {
            for (JsonNode n : node) collect(n, title, into);
        }
    }

    private static String panelExpr(Map<String, String> exprs, String title) {
        return exprs.entrySet().stream().filter(e -> e.getKey().startsWith(title + " / ")).map(Map.Entry::getValue)
                .findFirst().orElseThrow(() -> new AssertionError("no panel '" + title + "' in " + DASHBOARD));
    }

    private static Map<String, Double> byLabel(JsonNode result, String label) {
        Map<String, Double> out = new LinkedHashMap<>();
        for (JsonNode series : result) out.put(series.path("metric").path(label).asText(), series.path("value").get(1).asDouble());
        return out;
    }

    @Test
    void everyDashboardExpressionReturnsDataThroughPrometheusAndPromtoolAcceptsTheMetrics() throws Exception {
        Map<String, String> exprs = dashboardExpressions();
        assertThat(exprs).as("expressions in " + DASHBOARD).hasSizeGreaterThanOrEqualTo(30);
        try (PrometheusProcess prometheus = PrometheusProcess.start(dir.resolve("prometheus"),
                List.of("127.0.0.1:" + a.httpPort(), "127.0.0.1:" + b.httpPort()))) {
            await("both Managers scraped").atMost(Duration.ofSeconds(60)).until(() -> prometheus.targetsUp() == 2);
            Map<String, String> empty = new LinkedHashMap<>(exprs);
            try {
                // a 1-minute rate needs two scrapes of a series: each pass asks only what is still empty
                await("every dashboard expression returns data").atMost(Duration.ofSeconds(90))
                        .pollInterval(Duration.ofMillis(500)).until(() -> {
                            empty.entrySet().removeIf(e -> !prometheus.query(e.getValue()).isEmpty());
                            return empty.isEmpty();
                        });
            } catch (org.awaitility.core.ConditionTimeoutException e) {
                throw new AssertionError("dashboard expressions without data after 90 s: " + empty
                        + "; prometheus log: " + prometheus.logText(), e);
            }
            assertNoWorkloadFailure();

            // the figures match the workload: A hits from DRAM, B from its peer; ratios in [0, 1]
            String hitRatio = panelExpr(exprs, "Hit ratio by tier (tokens)");
            await("DRAM and peer hit ratios above zero").atMost(Duration.ofSeconds(60)).untilAsserted(() -> {
                Map<String, Double> ratio = byLabel(prometheus.query(hitRatio), "tier");
                assertThat(ratio).as("hit ratio by tier").containsKeys("dram", "ssd", "peer");
                assertThat(ratio.get("dram")).isGreaterThan(0).isLessThanOrEqualTo(1);
                assertThat(ratio.get("peer")).isGreaterThan(0).isLessThanOrEqualTo(1);
                assertThat(ratio.values().stream().mapToDouble(Double::doubleValue).sum()).isLessThanOrEqualTo(1.0 + 1e-9);
            });
            String latency = panelExpr(exprs, "QUERY latency p50 / p99");
            Map<String, Double> p50 = byLabel(prometheus.query(latency), "outcome");
            assertThat(p50.get("hit")).as("QUERY p50 of hits (s)").isGreaterThan(0).isLessThan(5);
            double restoreP50 = prometheus.query(panelExpr(exprs, "RESTORE latency p50 / p99")).get(0).path("value").get(1).asDouble();
            assertThat(restoreP50).as("RESTORE p50 (s)").isGreaterThan(0).isLessThan(5);
            System.out.printf("dashboard: %d expressions answered; hit ratio by tier %s; QUERY p50 %s s; RESTORE p50 %.6f s; "
                    + "%d workload rounds, %d local hits, %d peer hits%n", exprs.size(), byLabel(prometheus.query(hitRatio), "tier"),
                    p50, restoreP50, iterations.get(), localHits.get(), peerHits.get());
        }
        for (ManagerProcess m : List.of(a, b)) {
            String metrics = m.get("/metrics");
            // kept as a CI artifact: the exact series a clustered Manager exports after a workload
            Files.writeString(Path.of("target", "metrics-" + m.dir().getFileName() + ".txt"), metrics);
            Process promtool = new ProcessBuilder(PrometheusProcess.PROMTOOL.toString(), "check", "metrics")
                    .redirectErrorStream(true).start();
            try (var in = promtool.getOutputStream()) {
                in.write(metrics.getBytes(StandardCharsets.UTF_8));
            }
            String out = new String(promtool.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertThat(promtool.waitFor(60, TimeUnit.SECONDS)).isTrue();
            assertThat(promtool.exitValue()).as("promtool check metrics on %s: %s", m.dir(), out).isZero();
            assertThat(out).as("promtool lint findings").isBlank();
            // docs/operations.md lists every series the Manager exports
            String docs = Files.readString(OPERATIONS);
            List<String> undocumented = metrics.lines().filter(l -> l.startsWith("# TYPE orbitkv_"))
                    .map(l -> l.split(" ")[2]).filter(name -> !docs.contains("`" + name + "`")).toList();
            assertThat(undocumented).as("series missing from %s", OPERATIONS).isEmpty();
        }
    }

    @Test
    void statusPageRendersInChromiumWithTiersSessionsPeersChartAndErrors() throws Exception {
        // a caller with a wrong token: B refuses it and logs a WARN with what to do, which the page shows
        Path wrong = Files.writeString(dir.resolve("wrong-token"), "another-cluster-token-9876543210\n");
        Files.setPosixFilePermissions(wrong, java.nio.file.attribute.PosixFilePermissions.fromString("rw-------"));
        try (ClusterChannels channels = new ClusterChannels(ClusterSecurity.fromTokenFile("test", wrong, Optional.empty()))) {
            assertThatThrownBy(() -> ClusterProcessTest.locate(channels, b, List.of(first.keys().getFirst())))
                    .hasMessageContaining("UNAUTHENTICATED");
        }
        await("B's status has history and the error").atMost(Duration.ofSeconds(30)).until(() -> {
            JsonNode s = JSON.readTree(b.get("/status"));
            return s.at("/history/samples").size() >= 4 && s.at("/recentErrors/total").asLong() >= 1
                    && s.at("/prefixCache/hitTokens/peer").asLong() > 0;
        });
        String url = "http://127.0.0.1:" + b.httpPort() + "/";
        String dom = Chromium.dumpDom(dir, url, 5_000);
        assertThat(dom).as("the page's script ran and rendered /status").contains("data-loaded=\"true\"");
        assertThat(text(dom, "state")).isEqualTo("serving");
        assertThat(text(dom, "node")).startsWith("node b#");
        assertThat(text(dom, "dram-capacity")).isEqualTo("16.0 MiB");
        assertThat(text(dom, "ssd-capacity")).isEqualTo("32.0 MiB");
        assertThat(Integer.parseInt(text(dom, "session-count"))).isGreaterThanOrEqualTo(1);
        assertThat(dom).contains("<td>engine-b</td>");
        assertThat(text(dom, "membership")).startsWith("membership valid · 2 live member(s)");
        assertThat(dom).contains("<td>a</td>").contains("<td>b (this node)</td>");
        List<String> peerRow = cells(row(dom, "cache-peer"));
        assertThat(peerRow.get(0)).isEqualTo("peer");
        assertThat(Long.parseLong(peerRow.get(1).replace(",", ""))).as("peer hit tokens shown").isPositive();
        assertThat(Integer.parseInt(text(dom, "chart-points"))).as("chart intervals").isGreaterThanOrEqualTo(3);
        assertThat(attribute(dom, "chart-ratio", "points").split(" ")).as("hit-ratio polyline points").hasSizeGreaterThanOrEqualTo(3);
        assertThat(text(dom, "hit-ratio")).matches("\\d+\\.\\d%");
        assertThat(Integer.parseInt(text(dom, "error-total").replace(",", ""))).isGreaterThanOrEqualTo(1);
        assertThat(dom).contains("cluster authentication failure (bad_token)").contains("same clusterTokenFile contents");

        Path png = Path.of("target", "status-page.png");
        Files.deleteIfExists(png);
        Chromium.screenshot(dir, url, png, 1400, 1100, 5_000);
        byte[] image = Files.readAllBytes(png);
        assertThat(image.length).as("screenshot bytes").isGreaterThan(20_000);
        assertThat(new String(image, 1, 3, StandardCharsets.US_ASCII)).isEqualTo("PNG");
        System.out.println("status page screenshot: " + png.toAbsolutePath() + " (" + image.length + " bytes)");
    }

    @Test
    void orbitkvStatusPrintsTheSummaryOnceOrWatching() throws Exception {
        await("B has history samples").atMost(Duration.ofSeconds(30)).until(() ->
                JSON.readTree(b.get("/status")).at("/history/samples").size() >= 2);
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        int code = OrbitKvCli.run(new PrintWriter(out), new PrintWriter(err), "status", "--url", "127.0.0.1:" + b.httpPort());
        assertThat(code).as(err.toString()).isZero();
        String text = out.toString();
        System.out.print(text);
        assertThat(text).startsWith("OrbitKV Manager 127.0.0.1:" + b.httpPort() + "  serving")
                .containsPattern("(?m)^DRAM +16\\.0 MiB ")
                .containsPattern("(?m)^SSD +32\\.0 MiB ")
                .containsPattern("prefix cache: hit ratio (\\d+\\.\\d%|- \\(no queries\\)) \\(last minute\\)")
                .containsPattern("(?m)^  peer +[1-9][0-9,]* ")
                .contains("  engine-b  epoch 1  connected")
                .contains("cluster: membership valid, 2 live")
                .containsPattern("(?m)^  b#\\d+ .*\\(this node\\)$")
                .contains("peer reads: fetches staged");

        StringWriter watched = new StringWriter();
        assertThat(OrbitKvCli.run(new PrintWriter(watched), new PrintWriter(err), "status", "--url",
                "http://127.0.0.1:" + a.httpPort(), "--watch", "--interval", "1", "--iterations", "2")).isZero();
        assertThat(watched.toString().split("\033\\[H\033\\[2J", -1)).as("two redraws").hasSize(3);
        assertThat(watched.toString()).contains("engine-a  epoch 1  connected");

        StringWriter down = new StringWriter();
        assertThat(OrbitKvCli.run(new PrintWriter(new StringWriter()), new PrintWriter(down), "status", "--url",
                "http://127.0.0.1:" + closedPort())).isEqualTo(1);
        assertThat(down.toString()).startsWith("orbitkv: error: cannot read http://127.0.0.1:").contains("is the Manager running?");
        assertThat(OrbitKvCli.run(new PrintWriter(new StringWriter()), new PrintWriter(down), "status", "--interval", "0"))
                .isEqualTo(OrbitKvCli.EXIT_BAD_INPUT);
    }

    @Test
    void managersLogOneLinePerEventWithLevelAndComponentAndNoWarningAtStartUp() {
        String log = a.stderr();
        List<String> lines = log.lines().toList();
        assertThat(lines).as("A's stderr").isNotEmpty();
        assertThat(lines).as("one line per event: time, level, component, message").allMatch(l -> LOG_LINE.matcher(l).matches());
        assertThat(lines).as("no warning or error at start-up on A (nothing provoked one)")
                .noneMatch(l -> l.contains(" WARN ") || l.contains(" ERROR "));
        assertThat(log).doesNotContain("SLF4J").contains("INFO  storage.ssd: SSD store").contains("INFO  cluster: cluster member a#");
    }

    private static String text(String dom, String id) {
        Matcher m = Pattern.compile("id=\"" + Pattern.quote(id) + "\"[^>]*>([^<]*)<").matcher(dom);
        if (!m.find()) throw new AssertionError("no element #" + id + " in the DOM");
        return m.group(1).replace("&amp;", "&");
    }

    private static String attribute(String dom, String id, String attribute) {
        Matcher m = Pattern.compile("<[^>]*id=\"" + Pattern.quote(id) + "\"[^>]*>").matcher(dom);
        if (!m.find()) throw new AssertionError("no element #" + id + " in the DOM");
        Matcher a = Pattern.compile(attribute + "=\"([^\"]*)\"").matcher(m.group());
        if (!a.find()) throw new AssertionError("#" + id + " has no " + attribute);
        return a.group(1);
    }

    private static List<String> cells(String row) {
        List<String> out = new ArrayList<>();
        Matcher m = Pattern.compile("<td[^>]*>([^<]*)</td>").matcher(row);
        while (m.find()) out.add(m.group(1));
        return out;
    }

    private static String row(String dom, String id) {
        Matcher m = Pattern.compile("<tr id=\"" + Pattern.quote(id) + "\">(.*?)</tr>", Pattern.DOTALL).matcher(dom);
        if (!m.find()) throw new AssertionError("no row #" + id + " in the DOM");
        return m.group(1);
    }

    /** A loopback port nothing listens on (bound, then released). */
    private static int closedPort() throws java.io.IOException {
        try (java.net.ServerSocket s = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }
}
