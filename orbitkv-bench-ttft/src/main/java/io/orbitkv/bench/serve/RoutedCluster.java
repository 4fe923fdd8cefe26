package io.orbitkv.bench.serve;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.orbitkv.engine.ManagerLauncher;
import io.orbitkv.router.CostModel;
import io.orbitkv.router.MeasuredCosts;
import io.orbitkv.router.Policy;
import io.orbitkv.router.RouterSettings;
import io.orbitkv.router.daemon.RouterDaemon;
import io.orbitkv.router.daemon.WorkerEndpoint;

import io.orbitkv.testkit.ManagerProcess;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

/**
 * One routed cluster: N Managers (members of one etcd cluster, so peer reads are on), each
 * publishing KV events on its own PUB and replay endpoints, and one {@link RouterDaemon}
 * following the N event streams, reached over its HTTP API as any router client would.
 *
 * <p>Owns the Managers, the router and the HTTP client; borrows the etcd endpoint and the cluster
 * token (the caller owns etcd, which outlives clusters). Thread model: {@link #start}, the
 * measurements and {@link #close} on one driver thread; {@link #dispatcher}'s callbacks come from
 * the {@link EnginePool}'s driver and engine threads and touch only the HTTP client and a
 * concurrent map of the charges awaiting completion (bounded by the requests of one run).
 *
 * <p>Engine {@code i} of the pool registers with Manager {@code i} as instance
 * {@link #instance(int) routed-engine-i}: that is the topic the router's worker {@code w<i>}
 * subscribes to. Requests are routed by {@code token_ids}: the router hashes them into the
 * StateKeys an OrbitKV client publishes under, the names in the Managers' events.
 *
 * <p>Design note: fresh Managers and a fresh router per cluster (per policy and run), so every
 * policy starts from empty caches and an empty index; node ids carry the cluster's tag, so a new
 * member never inherits a stopped one's incarnation.
 */
final class RoutedCluster implements AutoCloseable {

    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Duration CONVERGE = Duration.ofSeconds(60);
    private static final long DRAIN_NANOS = TimeUnit.SECONDS.toNanos(10);

    private final List<ManagerProcess> managers;
    private final RouterDaemon router;
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    private final URI base;
    private final String policy;
    /** Charges of routed requests not yet completed, by request id. */
    private final Map<Integer, Route> pending = new ConcurrentHashMap<>();

    /** What the router answered for one request. */
    record Route(int requestId, int worker, long chargedTokens, boolean fallback, int prefixBlocks, int localPrefixBlocks,
                 int peerBlocks) {
    }

    private RoutedCluster(List<ManagerProcess> managers, RouterDaemon router, String policy) {
        this.managers = managers;
        this.router = router;
        this.policy = policy;
        this.base = URI.create("http://127.0.0.1:" + router.port());
    }

    /**
     * Starts {@code n} Managers under {@code dir} in the etcd cluster at {@code etcd}, waits until
     * every one sees {@code n} live members, and starts a router with default policy {@code policy}
     * whose cost model has blocks of {@code pageTokens} tokens and {@code pageBytes} bytes and
     * assumes {@code prefillTokensPerSecond} until the workers report their own.
     */
    static RoutedCluster start(Path dir, String etcd, Path token, String tag, int n, long pageBytes, int pageTokens,
                               byte[] namespaceDigest, String policy, double prefillTokensPerSecond)
            throws IOException, InterruptedException {
        Policy defaultPolicy = Policy.named(policy);
        List<ManagerProcess> managers = new ArrayList<>();
        List<WorkerEndpoint> workers = new ArrayList<>();
        RouterDaemon router = null;
        try {
            List<Future<ManagerProcess>> starting = new ArrayList<>();
            // the Managers start side by side: each start is a JVM launch that waits for its ready file
            try (ExecutorService launch = Executors.newVirtualThreadPerTaskExecutor()) {
                for (int i = 0; i < n; i++) {
                    String events = "tcp://127.0.0.1:" + freePort();
                    String replay = "tcp://127.0.0.1:" + freePort();
                    Path hostDir = dir.resolve("host-" + i);
                    ManagerLauncher.Cluster member = new ManagerLauncher.Cluster(etcd, tag + "-host-" + i, token);
                    starting.add(launch.submit(() -> ManagerLauncher.start(hostDir, pageBytes, member,
                            List.of("--set", "kvEventsEndpoint=" + events, "--set", "kvEventsReplayEndpoint=" + replay))));
                    workers.add(new WorkerEndpoint("w" + i, instance(i), events, replay));
                }
            }
            IOException failed = null;
            for (Future<ManagerProcess> f : starting) {
                try {
                    managers.add(f.get());
                } catch (ExecutionException e) {
                    IOException cause = e.getCause() instanceof IOException io ? io : new IOException(e.getCause());
                    if (failed == null) failed = cause;
                    else failed.addSuppressed(cause);
                }
            }
            if (failed != null) throw failed;
            for (ManagerProcess m : managers) {
                if (!m.awaitView(n, CONVERGE)) throw new IOException("membership did not reach " + n + " members: " + m.stderr());
            }
            CostModel cost = new CostModel(pageTokens, pageBytes, MeasuredCosts.DRAM_BYTES_PER_SECOND,
                    MeasuredCosts.SSD_BYTES_PER_SECOND, MeasuredCosts.PEER_BYTES_PER_SECOND, MeasuredCosts.PEER_FIXED_SECONDS,
                    prefillTokensPerSecond);
            router = RouterDaemon.start(new RouterDaemon.Options("127.0.0.1", 0, workers, defaultPolicy,
                    RouterSettings.defaults(cost), namespaceDigest));
            return new RoutedCluster(List.copyOf(managers), router, defaultPolicy.name());
        } catch (IOException | RuntimeException | InterruptedException e) {
            if (router != null) router.close();
            for (ManagerProcess m : managers) m.close();
            throw e;
        }
    }

    /** The instance id engine {@code i} registers with (the topic of its events). */
    static String instance(int i) {
        return "routed-engine-" + i;
    }

    Path socket(int i) {
        return managers.get(i).socket();
    }

    int size() {
        return managers.size();
    }

    /** Asks the router where {@code request} goes ({@code POST /route} with its token ids). */
    Route route(ServeRequest request) throws IOException {
        ObjectNode body = JSON.createObjectNode();
        body.put("prompt_tokens", request.prompt().length).put("policy", policy);
        ArrayNode tokens = body.putArray("token_ids");
        for (int t : request.prompt()) tokens.add(t);
        JsonNode a = post("/route", body);
        String name = a.path("worker").asText();
        if (!name.matches("w\\d+") || Integer.parseInt(name.substring(1)) >= managers.size()) {
            throw new IOException("the router chose an unknown worker: " + a);
        }
        return new Route(request.id(), Integer.parseInt(name.substring(1)), a.path("charged_tokens").asLong(),
                a.path("fallback").asBoolean(), a.path("prefix_blocks").asInt(), a.path("local_prefix_blocks").asInt(),
                a.path("peer_dram_blocks").asInt() + a.path("peer_ssd_blocks").asInt());
    }

    /**
     * Tells the router {@code result}'s request is done ({@code POST /complete}): gives back its
     * charge and, for a served request, the prefill it measured (computed tokens over the time from
     * the start of its service to its first token, restore included).
     */
    void complete(Route route, EnginePool.Result result) throws IOException {
        ObjectNode body = JSON.createObjectNode();
        body.put("worker", "w" + route.worker()).put("charged_tokens", route.chargedTokens());
        long prefillNanos = result.ttftNanos() - result.queueNanos();
        if (result.served() && prefillNanos > 0) {
            body.put("prefill_tokens", result.request().prompt().length - result.restoredTokens())
                    .put("prefill_ms", prefillNanos / 1e6);
        }
        post("/complete", body);
    }

    /**
     * A dispatcher that routes every request through the router and completes it there when
     * served; {@code routes} receives each answer.
     */
    EnginePool.Dispatcher dispatcher(Map<Integer, Route> routes) {
        return new EnginePool.Dispatcher() {
            @Override
            public int choose(ServeRequest request) throws IOException {
                Route r = route(request);
                pending.put(request.id(), r);
                routes.put(request.id(), r);
                return r.worker();
            }

            @Override
            public void served(EnginePool.Result result) throws IOException {
                Route r = pending.remove(result.request().id());
                if (r == null) throw new IllegalStateException("request " + result.request().id() + " was not routed");
                complete(r, result);
            }
        };
    }

    /** {@code GET /status} of the router. */
    JsonNode routerStatus() throws IOException {
        return get(base.resolve("/status"));
    }

    /** Routes the router answered with {@code fallback} (at least one worker scored by load only), from its metrics. */
    long fallbackRoutes() throws IOException {
        return (long) ServeBench.metric(text(base.resolve("/metrics")), "orbitkv_router_fallback_decisions_total");
    }

    /** Hit tokens {dram, ssd, peer} summed over the Managers' {@code /status}. */
    long[] hitTokens() throws IOException {
        long[] sum = new long[3];
        for (ManagerProcess m : managers) {
            JsonNode h = JSON.readTree(m.status()).path("prefixCache").path("hitTokens");
            sum[0] += h.path("dram").asLong();
            sum[1] += h.path("ssd").asLong();
            sum[2] += h.path("peer").asLong();
        }
        return sum;
    }

    /**
     * Waits (10 s deadline, checking every 20 ms) until every Manager's leases and reservations
     * are 0; returns what was still held, summed.
     */
    long awaitDrained() throws IOException, InterruptedException {
        long deadline = System.nanoTime() + DRAIN_NANOS;
        while (true) {
            long held = 0;
            for (ManagerProcess m : managers) {
                JsonNode s = JSON.readTree(m.status());
                held += s.path("leases").asLong() + s.path("reservations").asLong();
            }
            if (held == 0 || System.nanoTime() > deadline) return held;
            Thread.sleep(20);
        }
    }

    /** Outstanding tokens the router still charges, summed over its workers. */
    long routerOutstandingTokens() throws IOException {
        long sum = 0;
        for (JsonNode w : routerStatus().path("workers")) sum += w.path("outstanding_tokens").asLong();
        return sum;
    }

    private JsonNode post(String path, JsonNode body) throws IOException {
        HttpRequest request = HttpRequest.newBuilder(base.resolve(path)).timeout(Duration.ofSeconds(10))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofByteArray(JSON.writeValueAsBytes(body))).build();
        HttpResponse<String> r = send(request);
        if (r.statusCode() != 200) throw new IOException(path + " answered " + r.statusCode() + ": " + r.body());
        return JSON.readTree(r.body());
    }

    private JsonNode get(URI uri) throws IOException {
        return JSON.readTree(text(uri));
    }

    private String text(URI uri) throws IOException {
        HttpResponse<String> r = send(HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(10)).build());
        if (r.statusCode() != 200) throw new IOException(uri.getPath() + " answered " + r.statusCode() + ": " + r.body());
        return r.body();
    }

    private HttpResponse<String> send(HttpRequest request) throws IOException {
        try {
            return http.send(request, HttpResponse.BodyHandlers.ofString());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted while calling the router", e);
        }
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    /** Stops the router, then every Manager (SIGTERM; their exit is waited for). */
    @Override
    public void close() {
        router.close();
        http.close();
        for (ManagerProcess m : managers) m.close();
    }
}
