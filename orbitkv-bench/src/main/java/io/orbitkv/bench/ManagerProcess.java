package io.orbitkv.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A real Manager process for a benchmark run: {@code orbitkv manager} started either from this
 * JVM's {@code java} and class path (the shaded bench jar contains the server, and so does a test
 * class path) or from a given Manager jar, with its SSD files, socket, ready file and log under
 * one directory and its DRAM arenas under a tmpfs directory ({@code <shmDir>/arenas}); {@code shmDir}
 * itself is the Manager's {@code regionDir}, so the benchmark's REGISTER_REGION files go anywhere
 * in it outside {@code arenas/}. Owns the process; {@link #close}
 * stops it with SIGTERM and checks that it exits 0.
 *
 * <p>Thread model: one owner thread; {@link #status()} may be called from any thread. Start waits
 * for the ready file (which the Manager writes once it serves), polling it every 10 ms for at most
 * 60 s; a Manager that exits first fails the start with its log.
 */
public final class ManagerProcess implements AutoCloseable {

    private static final Pattern HTTP = Pattern.compile("http=127\\.0\\.0\\.1:(\\d+)");
    private static final HttpClient HTTP_CLIENT = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    private final Process process;
    private final Path socket;
    private final Path log;
    private final int httpPort;

    private ManagerProcess(Process process, Path socket, Path log, int httpPort) {
        this.process = process;
        this.socket = socket;
        this.log = log;
        this.httpPort = httpPort;
    }

    /**
     * Starts a Manager over {@code dir} with its arenas in {@code shmDir} and {@code options}
     * (command-line options of {@code orbitkv manager}, e.g. {@code --dram-bytes}, {@code --set k=v}).
     */
    public static ManagerProcess start(Path dir, Path shmDir, String heap, List<String> options)
            throws IOException, InterruptedException {
        return start(List.of("-Xmx" + heap, "-cp", System.getProperty("java.class.path"), "io.orbitkv.server.cli.OrbitKvCli"),
                dir, shmDir, options);
    }

    /** As {@link #start(Path, Path, String, List)}, running {@code managerJar} ({@code java -jar}) with a 1 GiB heap. */
    public static ManagerProcess startJar(Path managerJar, Path dir, Path shmDir, List<String> options)
            throws IOException, InterruptedException {
        return start(List.of("-Xmx1g", "-jar", managerJar.toString()), dir, shmDir, options);
    }

    /** {@code launch}: the JVM options and the class path and main class (or {@code -jar JAR}) after {@code java}. */
    private static ManagerProcess start(List<String> launch, Path dir, Path shmDir, List<String> options)
            throws IOException, InterruptedException {
        Files.createDirectories(dir);
        Files.createDirectories(shmDir);
        Path ready = dir.resolve("ready");
        Path socket = dir.resolve("m.sock");
        Path log = dir.resolve("manager.log");
        Files.deleteIfExists(ready);
        List<String> cmd = new ArrayList<>(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(), "--enable-native-access=ALL-UNNAMED",
                "-XX:+UseG1GC"));
        cmd.addAll(launch);
        cmd.addAll(List.of("manager",
                "--ssd-dir", dir.resolve("ssd").toString(), "--dram-dir", shmDir.resolve("arenas").toString(),
                "--set", "regionDir=" + shmDir,
                "--socket", socket.toString(), "--http", "0", "--ready-file", ready.toString()));
        cmd.addAll(options);
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        String line = "";
        while (!(line = readyLine(ready)).contains("pid=")) {
            if (!p.isAlive()) throw new IOException("the Manager exited " + p.exitValue() + ": " + Files.readString(log));
            if (System.nanoTime() > deadline) {
                p.destroyForcibly().waitFor();
                throw new IOException("the Manager did not get ready in 60 s: " + Files.readString(log));
            }
            Thread.sleep(10);
        }
        Matcher m = HTTP.matcher(line);
        if (!m.find()) {
            p.destroyForcibly().waitFor();
            throw new IOException("no http port in the ready line: " + line);
        }
        return new ManagerProcess(p, socket, log, Integer.parseInt(m.group(1)));
    }

    private static String readyLine(Path ready) throws IOException {
        try {
            return Files.readString(ready);
        } catch (java.nio.file.NoSuchFileException e) {
            return "";
        }
    }

    public Path socket() {
        return socket;
    }

    public long pid() {
        return process.pid();
    }

    public Path log() {
        return log;
    }

    /** The Manager's {@code /status} JSON. */
    public JsonNode status() throws IOException, InterruptedException {
        HttpResponse<String> r = HTTP_CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + httpPort + "/status"))
                .timeout(Duration.ofSeconds(10)).build(), HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() != 200) throw new IOException("/status answered " + r.statusCode() + ": " + r.body());
        return new ObjectMapper().readTree(r.body());
    }

    /** The Manager's {@code /metrics} (Prometheus text). */
    public String metrics() throws IOException, InterruptedException {
        HttpResponse<String> r = HTTP_CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + httpPort + "/metrics"))
                .timeout(Duration.ofSeconds(10)).build(), HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() != 200) throw new IOException("/metrics answered " + r.statusCode());
        return r.body();
    }

    /** SIGTERM; fails unless the Manager drains and exits 0 within 60 s. */
    @Override
    public void close() throws IOException {
        process.destroy();
        boolean stopped;
        try {
            stopped = process.waitFor(60, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // close() keeps the interrupt for the caller
            process.destroyForcibly();
            return;
        }
        if (!stopped) {
            process.destroyForcibly();
            throw new IOException("the Manager did not stop on SIGTERM: " + Files.readString(log));
        }
        if (process.exitValue() != 0) {
            throw new IOException("the Manager exited " + process.exitValue() + ": " + Files.readString(log));
        }
    }
}
