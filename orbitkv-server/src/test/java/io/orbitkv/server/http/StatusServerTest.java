package io.orbitkv.server.http;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** The three endpoints, their content types, 404 and 405, a failing status supplier, and a fresh body per scrape. */
class StatusServerTest {

    record Snapshot(long leases, List<String> instances) {
    }

    private final HttpClient http = HttpClient.newHttpClient();

    private HttpResponse<String> send(StatusServer s, String method, String path) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + s.port() + path))
                .method(method, HttpRequest.BodyPublishers.noBody()).build(), HttpResponse.BodyHandlers.ofString());
    }

    @Test
    void servesMetricsStatusAndHealthAndRefusesTheRest() throws Exception {
        PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        registry.counter("orbitkv.manager.queries", "outcome", "hit").increment(3);
        AtomicLong leases = new AtomicLong(2);
        try (StatusServer s = StatusServer.start("127.0.0.1", 0, registry,
                () -> new Snapshot(leases.get(), List.of("engine-1")))) {
            assertThat(s.address()).isEqualTo("127.0.0.1:" + s.port());
            HttpResponse<String> metrics = send(s, "GET", "/metrics");
            assertThat(metrics.statusCode()).isEqualTo(200);
            assertThat(metrics.headers().firstValue("Content-Type")).hasValueSatisfying(v -> assertThat(v).startsWith("text/plain"));
            assertThat(metrics.body()).contains("orbitkv_manager_queries_total{outcome=\"hit\"} 3.0");

            HttpResponse<String> status = send(s, "GET", "/status");
            assertThat(status.headers().firstValue("Content-Type")).hasValue("application/json");
            assertThat(status.body()).contains("\"leases\" : 2").contains("\"engine-1\"");
            leases.set(0);
            assertThat(send(s, "GET", "/status").body()).as("rendered per request").contains("\"leases\" : 0");

            assertThat(send(s, "GET", "/healthz").body()).isEqualTo("ok\n");
            assertThat(send(s, "HEAD", "/healthz").statusCode()).isEqualTo(200);
            assertThat(send(s, "GET", "/statusx").statusCode()).isEqualTo(404);
            HttpResponse<String> page = send(s, "GET", "/");
            assertThat(page.statusCode()).isEqualTo(200);
            assertThat(page.headers().firstValue("Content-Type")).hasValue("text/html; charset=utf-8");
            assertThat(page.body()).contains("<title>OrbitKV Manager</title>").contains("fetch(\"/status\"")
                    .as("self-contained: no external assets").doesNotContain("src=\"http", "href=\"http", "@import");
            assertThat(send(s, "GET", "/index.html").statusCode()).isEqualTo(404);
            assertThat(send(s, "POST", "/status").statusCode()).isEqualTo(405);
        }
    }

    @Test
    void aFailingStatusIs500AndTheServerKeepsServing() throws Exception {
        PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        try (StatusServer s = StatusServer.start("127.0.0.1", 0, registry, () -> {
            throw new IllegalStateException("status bug");
        })) {
            assertThat(send(s, "GET", "/status").statusCode()).isEqualTo(500);
            assertThat(send(s, "GET", "/healthz").statusCode()).isEqualTo(200);
        }
    }

    @Test
    void moreConcurrentExchangesThanTheBoundAreAnswered503() throws Exception {
        PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.Semaphore entered = new java.util.concurrent.Semaphore(0);
        try (StatusServer s = StatusServer.start("127.0.0.1", 0, registry, () -> {
            entered.release();
            try {
                release.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return new Snapshot(0, List.of());
        })) {
            List<java.util.concurrent.CompletableFuture<HttpResponse<String>>> held = new java.util.ArrayList<>();
            for (int i = 0; i < StatusServer.MAX_IN_FLIGHT; i++) {
                held.add(http.sendAsync(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + s.port() + "/status")).build(),
                        HttpResponse.BodyHandlers.ofString()));
            }
            assertThat(entered.tryAcquire(StatusServer.MAX_IN_FLIGHT, 20, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
            assertThat(send(s, "GET", "/healthz").statusCode()).isEqualTo(503);
            release.countDown();
            for (var f : held) assertThat(f.get(20, java.util.concurrent.TimeUnit.SECONDS).statusCode()).isEqualTo(200);
            assertThat(send(s, "GET", "/healthz").statusCode()).isEqualTo(200);
        }
    }
}
