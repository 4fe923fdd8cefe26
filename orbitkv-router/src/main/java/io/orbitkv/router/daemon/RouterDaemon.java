package io.orbitkv.router.daemon;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Tags;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.orbitkv.router.BatchOutcome;
import io.orbitkv.router.BlockKeys;
import io.orbitkv.router.Candidate;
import io.orbitkv.router.Decision;
import io.orbitkv.router.Policy;
import io.orbitkv.router.RouteRequest;
import io.orbitkv.router.Router;
import io.orbitkv.router.RouterSettings;
import io.orbitkv.router.events.KvEventDecoder;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.StateKeys;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.OptionalInt;
import java.util.concurrent.Executors;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.ToDoubleFunction;

/**
 * The router process ({@code orbitkv router}, docs/routing.md): a {@link Router} fed by an
 * {@link EventSubscriber}, answering {@code POST /route} and {@code POST /complete}, with
 * {@code GET /metrics} (Prometheus) and {@code GET /status} (JSON).
 *
 * <p>Owns the router, the HTTP server and the subscriber. Thread model: the router is confined
 * behind {@link #lock}; the subscriber's thread and the HTTP handlers (virtual threads, at most
 * {@value #MAX_CONCURRENT_REQUESTS} at once, the rest answered 503) take it for each call, which
 * is short (a route scores at most 65,536 blocks × 64 workers and is typically microseconds).
 * A request body is at most {@value #MAX_BODY_BYTES} bytes (65,536 block hashes of 64 hex
 * characters need 4.3 MB) and is refused with 413 past it. After a route, the chosen worker's
 * Manager is asked to prepare the request's pages ({@link PrepareDispatch}, asynchronous).
 *
 * <p>Over 500 lines: it is the HTTP surface (request parsing and its 4xx answers, the JSON
 * answers, the metric registrations) of one small object; the routing logic is {@link Router}'s.
 */
public final class RouterDaemon implements AutoCloseable {

    static final int MAX_BODY_BYTES = 5 << 20;
    static final int MAX_CONCURRENT_REQUESTS = 64;
    /**
     * The state group {@code token_ids} are keyed in: full attention, group 0 (the engine adapters'
     * {@code FullAttention.GROUP}), the group whose pages name a prefix.
     */
    static final int TOKEN_CHAIN_GROUP = 0;
    private static final ObjectMapper JSON = new ObjectMapper();

    /**
     * @param host            HTTP listen address
     * @param port            HTTP port (0: any free one)
     * @param workers         the workers, in order
     * @param defaultPolicy   the policy of a request that names none
     * @param settings        the router's bounds, fallback timing and cost constants
     * @param tokenChainNamespace the namespace digest to key {@code token_ids} with (the project's
     *                        token chain, then StateKeys of group {@value #TOKEN_CHAIN_GROUP}, as an
     *                        OrbitKV client without block hashes publishes them; docs/state-contract.md);
     *                        null: requests must carry hashes
     */
    public record Options(String host, int port, List<WorkerEndpoint> workers, Policy defaultPolicy,
                          RouterSettings settings, byte[] tokenChainNamespace, PrepareTransport prepares) {
        public Options {
            workers = List.copyOf(workers);
            if (workers.isEmpty()) throw new IllegalArgumentException("at least one --worker");
            if (port < 0 || port > 65_535) throw new IllegalArgumentException("port out of range: " + port);
            if (prepares == null && workers.stream().anyMatch(w -> !w.manager().isEmpty())) {
                throw new IllegalArgumentException("a worker's manager= needs the cluster credentials (--cluster-token-file)");
            }
        }

        /** Without remote prepares. */
        public Options(String host, int port, List<WorkerEndpoint> workers, Policy defaultPolicy, RouterSettings settings,
                       byte[] tokenChainNamespace) {
            this(host, port, workers, defaultPolicy, settings, tokenChainNamespace, null);
        }
    }

    /** A request's pages: the router's keys, and the names a Manager knows them by. */
    private record Pages(long[] keys, List<byte[]> names, boolean stateKeys) {
    }

    private final Options options;
    private final ReentrantLock lock = new ReentrantLock();
    private final Router router;
    private final PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    private final HttpServer http;
    private final ExecutorService handlers = Executors.newVirtualThreadPerTaskExecutor();
    private final Semaphore inFlight = new Semaphore(MAX_CONCURRENT_REQUESTS);
    private final EventSubscriber subscriber;
    /** Remote prepares of chosen workers' Managers; null when no worker names its Manager. */
    private final PrepareDispatch prepares;
    private final AtomicLong malformedBatches = new AtomicLong();
    private final AtomicLong skippedEvents = new AtomicLong();
    private final AtomicLong badRequests = new AtomicLong();
    private final AtomicLong busyRejections = new AtomicLong();
    private final java.util.concurrent.atomic.AtomicBoolean closed = new java.util.concurrent.atomic.AtomicBoolean();

    private RouterDaemon(Options options) throws IOException {
        this.options = options;
        List<String> names = new ArrayList<>();
        for (WorkerEndpoint w : options.workers()) names.add(w.name());
        this.router = new Router(options.settings(), names);
        this.subscriber = new EventSubscriber(this, options.workers());
        this.prepares = options.prepares() == null ? null : new PrepareDispatch(options.prepares(), registry);
        try {
            this.http = HttpServer.create(new InetSocketAddress(options.host(), options.port()), 64);
        } catch (IOException e) {
            subscriber.close();
            throw e;
        }
        http.setExecutor(handlers);
        http.createContext("/route", ex -> handle(ex, "POST", this::route));
        http.createContext("/complete", ex -> handle(ex, "POST", this::complete));
        http.createContext("/status", ex -> handle(ex, "GET", body -> status()));
        http.createContext("/metrics", this::metrics);
        registerMetrics();
    }

    /** Starts the subscriber and the HTTP server; fails with a clear message when the port is taken. */
    public static RouterDaemon start(Options options) throws IOException {
        RouterDaemon d = new RouterDaemon(options);
        d.subscriber.start();
        d.http.start();
        return d;
    }

    /** The HTTP port actually bound. */
    public int port() {
        return http.getAddress().getPort();
    }

    // ---- calls from the subscriber's thread ------------------------------------------------------

    BatchOutcome batch(int worker, long seq, KvEventDecoder.Decoded batch, long nowNanos) {
        skippedEvents.addAndGet(batch.skippedEvents());
        return locked(() -> router.onBatch(worker, seq, batch.events(), nowNanos));
    }

    void malformed(int worker, String reason) {
        malformedBatches.incrementAndGet();
        // a batch we cannot read may have removed blocks: forget the worker's entries
        locked(() -> {
            router.forget(worker);
            return null;
        });
    }

    void replayEnded(int worker, long nowNanos) {
        locked(() -> {
            router.onReplayEnd(worker, nowNanos);
            return null;
        });
    }

    long nextSequence(int worker) {
        return locked(() -> router.nextSequence(worker));
    }

    void tick(long nowNanos) {
        locked(() -> {
            router.onTick(nowNanos);
            return null;
        });
    }

    // ---- HTTP ------------------------------------------------------------------------------------

    private interface Handler {
        JsonNode apply(JsonNode body) throws BadRequest;
    }

    /** A request the router refuses; {@code status} is the HTTP status. */
    static final class BadRequest extends Exception {
        private static final long serialVersionUID = 1L;
        final int status;

        BadRequest(int status, String message) {
            super(message, null, false, false);
            this.status = status;
        }
    }

    private void handle(HttpExchange ex, String method, Handler handler) throws IOException {
        try (ex) {
            if (!inFlight.tryAcquire()) {
                busyRejections.incrementAndGet();
                reply(ex, 503, error("busy: " + MAX_CONCURRENT_REQUESTS + " requests in flight"));
                return;
            }
            try {
                if (!ex.getRequestMethod().equals(method)) {
                    reply(ex, 405, error(ex.getRequestURI().getPath() + " takes " + method));
                    return;
                }
                JsonNode body = method.equals("POST") ? readBody(ex) : null;
                reply(ex, 200, handler.apply(body));
            } catch (BadRequest e) {
                badRequests.incrementAndGet();
                reply(ex, e.status, error(e.getMessage()));
            } finally {
                inFlight.release();
            }
        }
    }

    private static JsonNode readBody(HttpExchange ex) throws IOException, BadRequest {
        try (InputStream in = ex.getRequestBody()) {
            byte[] b = in.readNBytes(MAX_BODY_BYTES + 1);
            if (b.length > MAX_BODY_BYTES) throw new BadRequest(413, "body over " + MAX_BODY_BYTES + " bytes");
            try {
                JsonNode n = JSON.readTree(b);
                if (n == null || !n.isObject()) throw new BadRequest(400, "body must be a JSON object");
                return n;
            } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
                throw new BadRequest(400, "body is not JSON: " + e.getOriginalMessage());
            }
        }
    }

    private static void reply(HttpExchange ex, int status, JsonNode body) throws IOException {
        byte[] bytes = JSON.writeValueAsBytes(body);
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.sendResponseHeaders(status, bytes.length);
        try (OutputStream out = ex.getResponseBody()) {
            out.write(bytes);
        }
    }

    private static ObjectNode error(String message) {
        return JSON.createObjectNode().put("error", message);
    }

    private JsonNode route(JsonNode body) throws BadRequest {
        long prompt = positiveLong(body, "prompt_tokens");
        Policy policy = options.defaultPolicy();
        if (body.has("policy")) {
            try {
                policy = Policy.named(body.get("policy").asText());
            } catch (IllegalArgumentException e) {
                throw new BadRequest(400, e.getMessage());
            }
        }
        Pages pages = keys(body);
        long[] keys = pages.keys();
        int max = options.settings().maxChainBlocks();
        if (keys.length > max) throw new BadRequest(400, "at most " + max + " blocks per request, not " + keys.length);
        byte[] namespace = namespace(body);
        int priority = body.has("priority") ? (int) Math.min(255, nonNegativeLong(body, "priority")) : 0;
        RouteRequest request = new RouteRequest(keys, prompt);
        Policy p = policy;
        Decision d = locked(() -> router.route(request, p, System.nanoTime()));
        prepare(d, pages, namespace, prompt, priority);
        ObjectNode out = JSON.createObjectNode();
        out.put("worker", d.chosen().name());
        out.put("policy", d.policy());
        out.put("fallback", d.fallback());
        out.put("charged_tokens", d.chargedTokens());
        terms(out, d.chosen());
        ObjectNode outlook = out.putObject("outlook");
        outlook.put("horizon_s", d.outlook().horizonSeconds());
        outlook.put("expected_arrivals", d.outlook().expectedArrivals());
        outlook.put("reuse_s_per_block", d.outlook().reuseSecondsPerBlock());
        ArrayNode all = out.putArray("candidates");
        for (Candidate c : d.candidates()) {
            ObjectNode o = all.addObject();
            o.put("worker", c.name());
            o.put("trusted", c.trusted());
            terms(o, c);
        }
        return out;
    }

    private static void terms(ObjectNode o, Candidate c) {
        o.put("ttft_s", c.ttftSeconds());
        o.put("queue_s", c.queueSeconds());
        o.put("transfer_s", c.transferSeconds());
        o.put("recompute_s", c.recomputeSeconds());
        o.put("recompute_tokens", c.recomputeTokens());
        o.put("outstanding_tokens", c.outstandingTokens());
        o.put("prefix_blocks", c.coverage().prefixBlocks());
        o.put("local_blocks", c.coverage().localBlocks());
        o.put("local_ssd_blocks", c.coverage().localSsdBlocks());
        o.put("peer_dram_blocks", c.coverage().peerDramBlocks());
        o.put("peer_ssd_blocks", c.coverage().peerSsdBlocks());
        o.put("local_prefix_blocks", c.coverage().localPrefixBlocks());
    }

    /** The request's {@code namespace} (64 hex), or null. */
    private static byte[] namespace(JsonNode body) throws BadRequest {
        JsonNode n = body.get("namespace");
        if (n == null) return null;
        if (!n.isTextual() || !n.asText().matches("[0-9a-fA-F]{64}")) {
            throw new BadRequest(400, "namespace must be 64 hex characters (a SHA-256 digest)");
        }
        return HexFormat.of().parseHex(n.asText());
    }

    /**
     * Sends the chosen worker's Manager a remote prepare of the request's pages, first use = the
     * worker's estimated queue wait (asynchronous: the answer is only counted). The namespace is
     * the request's, else the worker's {@code namespace=}, else {@code --token-chain-namespace}
     * for {@code token_ids}.
     */
    private void prepare(Decision d, Pages pages, byte[] requestNamespace, long prompt, int priority) {
        WorkerEndpoint w = options.workers().get(d.worker());
        if (prepares == null || w.manager().isEmpty() || pages.names().isEmpty()) return;
        byte[] ns = requestNamespace;
        if (ns == null && !w.namespace().isEmpty()) ns = HexFormat.of().parseHex(w.namespace());
        if (ns == null && pages.stateKeys()) ns = options.tokenChainNamespace();
        if (ns == null) {
            prepares.count("no_namespace");
            return;
        }
        int firstUse = (int) Math.min(Integer.MAX_VALUE, Math.round(Math.max(0, d.chosen().queueSeconds()) * 1e3));
        prepares.send(w.manager(), new PrepareTransport.Demand(ns, pages.stateKeys(), TOKEN_CHAIN_GROUP, pages.names(),
                prompt, firstUse, priority));
    }

    /**
     * Block keys from {@code block_hashes} (hex strings or integers: as an engine names them to
     * its Manager, an integer as 8 bytes little-endian) or {@code token_ids} (StateKeys).
     */
    private Pages keys(JsonNode body) throws BadRequest {
        JsonNode hashes = body.get("block_hashes");
        JsonNode tokens = body.get("token_ids");
        if (hashes != null && tokens != null) throw new BadRequest(400, "give block_hashes or token_ids, not both");
        int max = options.settings().maxChainBlocks();
        if (hashes != null) {
            if (!hashes.isArray()) throw new BadRequest(400, "block_hashes must be an array");
            if (hashes.size() > max) throw new BadRequest(400, "at most " + max + " blocks per request, not " + hashes.size());
            long[] keys = new long[hashes.size()];
            List<byte[]> names = new ArrayList<>(keys.length);
            for (int i = 0; i < keys.length; i++) {
                JsonNode h = hashes.get(i);
                if (h.isIntegralNumber() && h.canConvertToLong()) {
                    keys[i] = BlockKeys.of(h.longValue());
                    names.add(java.nio.ByteBuffer.allocate(8).order(java.nio.ByteOrder.LITTLE_ENDIAN).putLong(h.longValue()).array());
                } else if (h.isTextual() && h.asText().matches("([0-9a-fA-F]{2}){1,64}")) {
                    byte[] b = HexFormat.of().parseHex(h.asText());
                    keys[i] = BlockKeys.of(b);
                    names.add(b);
                } else {
                    throw new BadRequest(400, "block_hashes[" + i + "] must be an integer or 1..64 bytes of hex");
                }
            }
            return new Pages(keys, names, false);
        }
        if (tokens != null) {
            if (options.tokenChainNamespace() == null) {
                throw new BadRequest(400, "token_ids need the router started with --token-chain-namespace; send block_hashes");
            }
            if (!tokens.isArray()) throw new BadRequest(400, "token_ids must be an array");
            int blockTokens = options.settings().cost().blockTokens();
            if (tokens.size() / blockTokens > max) throw new BadRequest(400, "token_ids cover more than " + max + " blocks");
            int[] t = new int[tokens.size()];
            for (int i = 0; i < t.length; i++) {
                JsonNode v = tokens.get(i);
                if (!v.isInt()) throw new BadRequest(400, "token_ids[" + i + "] must be a 32-bit integer");
                t[i] = v.intValue();
            }
            // a client without block hashes publishes under STATE_KEY names: the Manager's events carry those
            List<StateKey> pages = StateKeys.forTokens(options.tokenChainNamespace(), TOKEN_CHAIN_GROUP, t, blockTokens,
                    new byte[0]);
            long[] keys = new long[pages.size()];
            List<byte[]> names = new ArrayList<>(keys.length);
            for (int i = 0; i < keys.length; i++) {
                names.add(pages.get(i).toBytes());
                keys[i] = BlockKeys.of(names.get(i));
            }
            return new Pages(keys, names, true);
        }
        return new Pages(new long[0], List.of(), false);
    }

    private JsonNode complete(JsonNode body) throws BadRequest {
        JsonNode w = body.get("worker");
        if (w == null || !w.isTextual()) throw new BadRequest(400, "worker (a name) is required");
        OptionalInt i = router.indexOf(w.asText());
        if (i.isEmpty()) throw new BadRequest(404, "no worker " + w.asText());
        long charged = nonNegativeLong(body, "charged_tokens");
        long computed = body.has("prefill_tokens") ? nonNegativeLong(body, "prefill_tokens") : 0;
        double ms = body.has("prefill_ms") ? body.get("prefill_ms").asDouble(-1) : 0;
        if (!(ms >= 0) || Double.isInfinite(ms)) throw new BadRequest(400, "prefill_ms must be a number >= 0");
        int worker = i.getAsInt();
        locked(() -> {
            router.completed(worker, charged, computed, ms / 1e3, System.nanoTime());
            return null;
        });
        return JSON.createObjectNode().put("ok", true);
    }

    private JsonNode status() {
        long now = System.nanoTime();
        ObjectNode out = JSON.createObjectNode();
        ArrayNode ws = out.putArray("workers");
        locked(() -> {
            for (int i = 0; i < router.workers(); i++) {
                Router.WorkerStatus s = router.status(i, now);
                ws.addObject().put("name", s.name()).put("trusted", s.trusted()).put("repairing", s.repairing())
                        .put("stale", s.stale()).put("outstanding_tokens", s.outstandingTokens())
                        .put("prefill_tokens_per_second", s.prefillTokensPerSecond()).put("next_sequence", s.expectedSequence());
            }
            Router.Counters c = router.counters();
            out.put("index_blocks", c.indexBlocks()).put("index_max_blocks", c.indexMaxBlocks());
            return null;
        });
        return out;
    }

    private void metrics(HttpExchange ex) throws IOException {
        try (ex) {
            byte[] b = registry.scrape().getBytes(StandardCharsets.UTF_8);
            ex.getResponseHeaders().set("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
            ex.sendResponseHeaders(200, b.length);
            try (OutputStream out = ex.getResponseBody()) {
                out.write(b);
            }
        }
    }

    private void registerMetrics() {
        for (String p : List.of("joint", "load", "overlap")) {
            FunctionCounter.builder("orbitkv_router_routes", this, d -> d.counter(c -> c.routedByPolicy().getOrDefault(p, 0L)))
                    .tags(Tags.of("policy", p)).description("requests routed").register(registry);
        }
        counter("orbitkv_router_fallback_decisions", "routes where at least one worker was scored by load only", c -> c.fallbackDecisions());
        counter("orbitkv_router_event_batches", "KV event batches received", c -> c.batches());
        counter("orbitkv_router_event_gaps", "sequence gaps detected", c -> c.gaps());
        counter("orbitkv_router_repairs_completed", "gaps filled by a replay", c -> c.repairsCompleted());
        counter("orbitkv_router_repairs_abandoned", "gaps not filled (entries cleared, rebuilt from live events)", c -> c.repairsAbandoned());
        counter("orbitkv_router_worker_restarts", "worker restarts seen (entries cleared)", c -> c.restarts());
        counter("orbitkv_router_index_evicted", "blocks forgotten because the index was full", c -> c.indexEvicted());
        FunctionCounter.builder("orbitkv_router_malformed_batches", malformedBatches, AtomicLong::get)
                .description("event batches that did not decode (the worker's entries cleared)").register(registry);
        FunctionCounter.builder("orbitkv_router_skipped_events", skippedEvents, AtomicLong::get)
                .description("events of an unknown type or medium").register(registry);
        FunctionCounter.builder("orbitkv_router_bad_requests", badRequests, AtomicLong::get)
                .description("HTTP requests refused (4xx)").register(registry);
        FunctionCounter.builder("orbitkv_router_busy_rejections", busyRejections, AtomicLong::get)
                .description("HTTP requests refused with 503 (too many in flight)").register(registry);
        FunctionCounter.builder("orbitkv_router_event_loop_errors", subscriber.loopErrors, AtomicLong::get)
                .description("unexpected errors of the event thread (logged, loop continues)").register(registry);
        FunctionCounter.builder("orbitkv_router_replay_requests", subscriber.replayRequests, AtomicLong::get)
                .description("replay requests sent").register(registry);
        Gauge.builder("orbitkv_router_index_blocks", this, d -> d.counter(c -> c.indexBlocks())).description("blocks indexed").register(registry);
        Gauge.builder("orbitkv_router_index_blocks_bound", this, d -> d.counter(c -> c.indexMaxBlocks())).description("index block bound").register(registry);
        for (int i = 0; i < options.workers().size(); i++) {
            int w = i;
            Tags t = Tags.of("worker", options.workers().get(i).name());
            workerGauge("orbitkv_router_worker_outstanding_tokens", "prefill tokens routed, not completed", t, s -> s.outstandingTokens(), w);
            workerGauge("orbitkv_router_worker_prefill_tokens_per_second", "measured prefill rate", t, s -> s.prefillTokensPerSecond(), w);
            workerGauge("orbitkv_router_worker_trusted", "1 when the worker's index entries are used", t, s -> s.trusted() ? 1 : 0, w);
        }
    }

    private void counter(String name, String description, ToDoubleFunction<Router.Counters> f) {
        FunctionCounter.builder(name, this, d -> d.counter(f)).description(description).register(registry);
    }

    private void workerGauge(String name, String description, Tags tags, ToDoubleFunction<Router.WorkerStatus> f, int w) {
        Gauge.builder(name, this, d -> f.applyAsDouble(d.locked(() -> d.router.status(w, System.nanoTime()))))
                .tags(tags).description(description).register(registry);
    }

    private double counter(ToDoubleFunction<Router.Counters> f) {
        return f.applyAsDouble(locked(router::counters));
    }

    private static long positiveLong(JsonNode body, String field) throws BadRequest {
        long v = nonNegativeLong(body, field);
        if (v < 1) throw new BadRequest(400, field + " must be >= 1");
        return v;
    }

    private static long nonNegativeLong(JsonNode body, String field) throws BadRequest {
        JsonNode v = body.get(field);
        if (v == null || !v.isIntegralNumber() || !v.canConvertToLong() || v.longValue() < 0) {
            throw new BadRequest(400, field + " must be an integer >= 0");
        }
        return v.longValue();
    }

    private <T> T locked(java.util.function.Supplier<T> f) {
        lock.lock();
        try {
            return f.get();
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) return;
        http.stop(0);
        subscriber.close();
        if (prepares != null) prepares.close();
        handlers.close();
        registry.close();
    }
}
