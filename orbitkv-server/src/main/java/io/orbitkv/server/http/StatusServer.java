package io.orbitkv.server.http;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Objects;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Semaphore;
import java.util.function.Supplier;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The Manager's HTTP endpoint for people and scrapers: {@code GET /} (the status page, one
 * self-contained HTML file that renders {@code /status} in the browser and refreshes itself),
 * {@code GET /metrics} (Prometheus text format 0.0.4 from the {@link PrometheusMeterRegistry}),
 * {@code GET /status} (JSON of the Manager's status value: tiers, instances, leases, queries) and
 * {@code GET /healthz} ({@code ok}). Anything else is 404; a method other than GET/HEAD is 405; more than
 * {@value #MAX_IN_FLIGHT} exchanges at once get 503.
 *
 * <p>Owns the {@link HttpServer} and its executor. Thread model: each exchange runs on its own
 * virtual thread; the status supplier and the registry must be thread-safe. Bound to 127.0.0.1
 * by default: the endpoint has no authentication and {@code /status} names instance ids.
 *
 * <p>Design note: the JDK's {@code com.sun.net.httpserver} rather than an embedded web server: three
 * read-only endpoints scraped every few seconds need no framework, and it adds no dependency
 * to the shaded jar. A status body is rendered per request (a few KiB), not cached, so a scrape
 * never shows a stale lease count.
 */
public final class StatusServer implements AutoCloseable {

    private static final Logger LOG = Logger.getLogger(StatusServer.class.getName());

    private final HttpServer server;
    private final ExecutorService executor;
    private final PrometheusMeterRegistry registry;
    private final Supplier<?> status;
    /** Exchanges being rendered at once, at most {@link #MAX_IN_FLIGHT}; one more is answered 503. */
    private final Semaphore inFlight = new Semaphore(MAX_IN_FLIGHT);
    /** Concurrent renders allowed: a scrape storm cannot pile up threads and status snapshots. */
    static final int MAX_IN_FLIGHT = 16;
    private final ObjectMapper json = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT)
            .disable(SerializationFeature.FAIL_ON_EMPTY_BEANS);

    private StatusServer(HttpServer server, PrometheusMeterRegistry registry, Supplier<?> status) {
        this.server = server;
        this.registry = registry;
        this.status = status;
        this.executor = Executors.newVirtualThreadPerTaskExecutor();
        server.setExecutor(executor);
        server.createContext("/metrics", ex -> serve(ex, () -> new Body("text/plain; version=0.0.4; charset=utf-8",
                registry.scrape())));
        server.createContext("/status", ex -> serve(ex, () -> new Body("application/json",
                json.writeValueAsString(status.get()))));
        server.createContext("/healthz", ex -> serve(ex, () -> new Body("text/plain", "ok\n")));
        server.createContext("/", ex -> serve(ex, () -> new Body("text/html; charset=utf-8", PAGE)));
    }

    /** The status page, read once from the jar (a few KiB; it has no external assets). */
    private static final String PAGE = loadPage();

    private static String loadPage() {
        try (var in = StatusServer.class.getResourceAsStream("status.html")) {
            if (in == null) throw new IllegalStateException("status.html is missing from the jar");
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    /**
     * Binds {@code host:port} ({@code port} 0 picks a free one) and starts serving.
     *
     * @throws IOException if the address cannot be bound
     */
    public static StatusServer start(String host, int port, PrometheusMeterRegistry registry, Supplier<?> status)
            throws IOException {
        Objects.requireNonNull(registry, "registry");
        Objects.requireNonNull(status, "status");
        HttpServer server = HttpServer.create(new InetSocketAddress(host, port), 64);
        StatusServer s = new StatusServer(server, registry, status);
        server.start();
        return s;
    }

    /** The bound port (the real one when started with 0). */
    public int port() {
        return server.getAddress().getPort();
    }

    /** The bound address as {@code host:port}. */
    public String address() {
        return server.getAddress().getAddress().getHostAddress() + ":" + port();
    }

    private record Body(String contentType, String text) {
    }

    @FunctionalInterface
    private interface Render {
        Body render() throws IOException;
    }

    private void serve(HttpExchange ex, Render render) throws IOException {
        if (!inFlight.tryAcquire()) {
            try (ex) {
                send(ex, 503, new Body("text/plain", "busy\n"));
            }
            return;
        }
        try (ex) {
            String path = ex.getRequestURI().getPath();
            if (!path.equals(ex.getHttpContext().getPath())) {
                send(ex, 404, new Body("text/plain", "not found\n"));
                return;
            }
            String method = ex.getRequestMethod();
            if (!method.equals("GET") && !method.equals("HEAD")) {
                ex.getResponseHeaders().set("Allow", "GET, HEAD");
                send(ex, 405, new Body("text/plain", "method not allowed\n"));
                return;
            }
            Body body;
            try {
                body = render.render();
            } catch (IOException | RuntimeException e) {
                LOG.log(Level.WARNING, "rendering " + path + " failed", e);
                body = null;
            }
            if (body == null) {
                send(ex, 500, new Body("text/plain", "internal error\n"));
            } else {
                send(ex, 200, body);
            }
        } finally {
            inFlight.release();
        }
    }

    private static void send(HttpExchange ex, int code, Body body) throws IOException {
        byte[] bytes = body.text().getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", body.contentType());
        ex.getResponseHeaders().set("Cache-Control", "no-store");
        boolean head = ex.getRequestMethod().equals("HEAD");
        ex.sendResponseHeaders(code, head ? -1 : bytes.length);
        if (!head) {
            try (OutputStream out = ex.getResponseBody()) {
                out.write(bytes);
            }
        }
    }

    /** Stops serving at once (a scrape in progress is cut). Idempotent. */
    @Override
    public void close() {
        server.stop(0);
        executor.shutdownNow();
    }
}
