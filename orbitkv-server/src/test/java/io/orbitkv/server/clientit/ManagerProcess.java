package io.orbitkv.server.clientit;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A real Manager in its own JVM, as {@code bin/orbitkv manager} starts it (same main class and
 * options, on this test's class path), on private directories: waits for its ready line rather
 * than sleeping, and stops it with SIGTERM. Owns the process; not thread-safe (one test class).
 */
final class ManagerProcess implements AutoCloseable {

    private static final Pattern READY = Pattern.compile("orbitkv manager ready socket=(\\S+) http=(\\S+) pid=(\\d+)");

    private final Process process;
    final Path socket;
    final String http;
    final Path dramDir;

    private ManagerProcess(Process process, Path socket, String http, Path dramDir) {
        this.process = process;
        this.socket = socket;
        this.http = http;
        this.dramDir = dramDir;
    }

    /** Starts a Manager with small tiers under {@code dir} and returns once it is ready (at most 60 s). */
    static ManagerProcess start(Path dir) throws Exception {
        Path shm = Path.of("/dev/shm");
        Path dramDir = Files.isDirectory(shm) ? Files.createTempDirectory(shm, "okv-it-") : dir.resolve("dram");
        List<String> command = new ArrayList<>(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-cp", System.getProperty("java.class.path"),
                "io.orbitkv.server.cli.OrbitKvCli", "manager",
                "--dram-bytes", "64m", "--ssd-bytes", "64m", "--http", "0",
                "--dram-dir", dramDir.toString(), "--ssd-dir", dir.resolve("ssd").toString(),
                "--socket", dir.resolve("m.sock").toString()));
        Process p = new ProcessBuilder(command).directory(dir.toFile())
                .redirectError(dir.resolve("manager.log").toFile()).start();
        BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        String line = CompletableFuture.supplyAsync(() -> {
            try {
                return out.readLine();
            } catch (IOException e) {
                return null;
            }
        }).get(60, TimeUnit.SECONDS);
        Matcher m = line == null ? null : READY.matcher(line);
        if (m == null || !m.find()) {
            p.destroyForcibly();
            throw new IllegalStateException("the Manager did not become ready: " + line + "\n"
                    + Files.readString(dir.resolve("manager.log")));
        }
        return new ManagerProcess(p, Path.of(m.group(1)), m.group(2), dramDir);
    }

    /** The Prometheus text of {@code /metrics}. */
    String metrics() throws Exception {
        try (HttpClient client = HttpClient.newHttpClient()) {
            return client.send(HttpRequest.newBuilder(URI.create("http://" + http + "/metrics")).build(),
                    HttpResponse.BodyHandlers.ofString()).body();
        }
    }

    /** SIGTERM, then the exit status (the Manager drains and exits 0). */
    int stop() throws InterruptedException {
        process.destroy();
        if (!process.waitFor(30, TimeUnit.SECONDS)) {
            process.destroyForcibly();
            return -1;
        }
        return process.exitValue();
    }

    @Override
    public void close() throws InterruptedException {
        if (process.isAlive()) stop();
    }
}
