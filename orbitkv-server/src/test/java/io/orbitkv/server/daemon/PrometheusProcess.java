package io.orbitkv.server.daemon;

import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.orbitkv.testkit.Environment;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

/**
 * A real Prometheus server (Debian {@code prometheus}, {@code /usr/bin/prometheus}) scraping a
 * list of Managers every second as job {@code orbitkv}, on a free loopback port with its storage
 * under the test's directory; queried through its HTTP API. {@link #start} returns once it
 * answers {@code /-/ready}; {@link #close} stops it.
 */
final class PrometheusProcess implements AutoCloseable {

    static final Path BINARY = Path.of("/usr/bin/prometheus");
    static final Path PROMTOOL = Path.of("/usr/bin/promtool");
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final HttpClient HTTP = HttpClient.newHttpClient();

    private final Process process;
    private final Path log;
    final int port;

    private PrometheusProcess(Process process, Path log, int port) {
        this.process = process;
        this.log = log;
        this.port = port;
    }

    /** Skips the calling test when Prometheus is not installed; fails it under CI's switch ({@link Environment}). */
    static void requireInstalled() {
        Environment.require(Files.isExecutable(BINARY) && Files.isExecutable(PROMTOOL),
                "prometheus and promtool at " + BINARY + ", " + PROMTOOL + " (apt-get install -y prometheus; .ci/run does this)");
    }

    /** Starts Prometheus under {@code dir} scraping {@code targets} ({@code host:port}) every second. */
    static PrometheusProcess start(Path dir, List<String> targets) throws IOException {
        requireInstalled();
        Files.createDirectories(dir);
        Path config = dir.resolve("prometheus.yml");
        Files.writeString(config, """
                global:
                  scrape_interval: 1s
                  evaluation_interval: 1s
                scrape_configs:
                  - job_name: orbitkv
                    static_configs:
                      - targets: [%s]
                """.formatted(targets.stream().map(t -> "'" + t + "'").collect(Collectors.joining(", "))));
        int port = freePort();
        Path log = dir.resolve("prometheus.log");
        Process p = new ProcessBuilder(BINARY.toString(), "--config.file=" + config,
                "--storage.tsdb.path=" + dir.resolve("data"), "--web.listen-address=127.0.0.1:" + port,
                "--storage.tsdb.retention.time=1h", "--log.level=warn")
                .redirectErrorStream(true).redirectOutput(log.toFile()).start();
        PrometheusProcess prometheus = new PrometheusProcess(p, log, port);
        try {
            await("prometheus ready on " + port).atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(100))
                    .until(() -> {
                        if (!p.isAlive()) throw new AssertionError("prometheus exited: " + prometheus.logText());
                        return prometheus.status("/-/ready") == 200;
                    });
        } catch (RuntimeException | Error e) {
            prometheus.close();
            throw e;
        }
        return prometheus;
    }

    private static int freePort() throws IOException {
        try (java.net.ServerSocket s = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    String logText() {
        try {
            return Files.exists(log) ? Files.readString(log) : "";
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private int status(String path) {
        try {
            return HTTP.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
                    .timeout(Duration.ofSeconds(5)).build(), HttpResponse.BodyHandlers.discarding()).statusCode();
        } catch (IOException e) {
            return -1;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return -1;
        }
    }

    /** GET {@code path} of the HTTP API; the JSON body, which must say {@code "status":"success"}. */
    JsonNode api(String path) {
        try {
            HttpResponse<String> r = HTTP.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
                    .timeout(Duration.ofSeconds(10)).build(), HttpResponse.BodyHandlers.ofString());
            JsonNode body = JSON.readTree(r.body());
            if (r.statusCode() != 200 || !"success".equals(body.path("status").asText())) {
                throw new AssertionError(path + " answered " + r.statusCode() + ": " + r.body());
            }
            return body.path("data");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
    }

    /** The instant query {@code expr}: its {@code data.result} (an array of series, possibly empty). */
    JsonNode query(String expr) {
        return api("/api/v1/query?query=" + URLEncoder.encode(expr, StandardCharsets.UTF_8)).path("result");
    }

    /** Active scrape targets whose health is {@code up}. */
    int targetsUp() {
        int up = 0;
        for (JsonNode t : api("/api/v1/targets?state=active").path("activeTargets")) {
            if ("up".equals(t.path("health").asText())) up++;
        }
        return up;
    }

    @Override
    public void close() {
        process.destroy();
        try {
            if (!process.waitFor(20, TimeUnit.SECONDS)) process.destroyForcibly().waitFor();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            process.destroyForcibly();
        }
    }
}
