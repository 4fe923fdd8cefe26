package io.orbitkv.engine;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A Manager ({@code orbitkv manager}) started as a child JVM on this JVM's class path, with all
 * its files under one directory: {@code ssd/}, {@code dram/}, {@code m.sock}, {@code ready},
 * {@code manager.err}. Used by the demo, the parity gates, the handoff tests and the TTFT bench;
 * started with a {@link Cluster}, it is a member of an etcd cluster (see {@link EtcdLauncher}).
 *
 * <p>Owns the child process. Thread model: confined to its creator. {@link #start} returns once
 * the ready file exists (the Manager writes it after the socket listens); it waits by watching
 * the file with a deadline, and fails with the Manager's stderr if the process exits first.
 *
 * <p>Design note: a separate process, not an in-JVM daemon, so "the Manager restarts" is a real
 * process exit with its arenas unmapped and its SSD store reopened and recovered from disk.
 * The budgets (256 DRAM slots of at least 64 KiB, SSD four times DRAM, write-through) hold a
 * demo conversation many times over and make every sealed page reach the SSD.
 */
public final class ManagerLauncher implements AutoCloseable {

    private static final Pattern HTTP = Pattern.compile("http=127\\.0\\.0\\.1:(\\d+)");
    private static final Pattern CLUSTER = Pattern.compile("cluster=(\\S+) node=");
    private static final Duration START_TIMEOUT = Duration.ofSeconds(60);
    private static final long MIN_SLOT_BYTES = 64 * 1024;
    private static final long DRAM_SLOTS = 256;

    private final Path dir;
    private final Process process;
    private final int httpPort;
    /** {@code host:port} of the cluster endpoint; empty for a single-node Manager. */
    private final String clusterEndpoint;

    private ManagerLauncher(Path dir, Process process, int httpPort, String clusterEndpoint) {
        this.dir = dir;
        this.process = process;
        this.httpPort = httpPort;
        this.clusterEndpoint = clusterEndpoint;
    }

    /**
     * Membership options of a clustered Manager: etcd {@code etcd}, node {@code nodeId}, the
     * shared token file, a free loopback cluster port, and a 2 s lease (so a stopped member
     * leaves a view within seconds) with a 1 s catalog lookup deadline.
     */
    public record Cluster(String etcd, String nodeId, Path tokenFile) {
        public Cluster {
            Objects.requireNonNull(etcd, "etcd");
            Objects.requireNonNull(nodeId, "nodeId");
            Objects.requireNonNull(tokenFile, "tokenFile");
        }

        /** The {@code --cluster-id} every launched member shares. */
        public static final String CLUSTER_ID = "launcher";

        /** Writes a cluster token to {@code file}, mode 0600 as docs/operations.md asks, and returns the file. */
        public static Path writeToken(Path file) throws IOException {
            Files.writeString(file, "orbitkv-launcher-cluster-token-0123456789\n");
            return Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-------"));
        }

        List<String> options() {
            return List.of("--etcd", etcd, "--node-id", nodeId, "--cluster-id", CLUSTER_ID,
                    "--cluster-token-file", tokenFile.toString(), "--cluster-listen", "127.0.0.1:0",
                    "--set", "clusterLeaseTtlMillis=2000", "--set", "clusterLookupTimeoutMillis=1000");
        }
    }

    /** Starts a Manager sized for pages of up to 64 KiB; see {@link #start(Path, long)}. */
    public static ManagerLauncher start(Path dir) throws IOException, InterruptedException {
        return start(dir, MIN_SLOT_BYTES);
    }

    /**
     * Starts a Manager over {@code dir} (reusing its SSD store if one is there) whose DRAM slots
     * hold {@code pageBytes}, and waits until ready. Budgets: slot = the next power of two of
     * the page, at least 64 KiB; DRAM = 256 slots (16 MiB for the CI model's 8 KiB pages, 64 MiB
     * for the bench model's 256 KiB pages); SSD = 4 x DRAM.
     */
    public static ManagerLauncher start(Path dir, long pageBytes) throws IOException, InterruptedException {
        return launch(dir, pageBytes, List.of());
    }

    /**
     * As {@link #start(Path, long)}, with {@code extraOptions} appended to the command line (for
     * instance {@code --set maxLeases=2}); a later option wins.
     */
    public static ManagerLauncher start(Path dir, long pageBytes, List<String> extraOptions)
            throws IOException, InterruptedException {
        return launch(dir, pageBytes, extraOptions);
    }

    /**
     * As {@link #start(Path, long)}, as a member of {@code cluster}. Returns once the Manager is
     * ready; its membership view may still be converging (see {@link #awaitView}).
     */
    public static ManagerLauncher start(Path dir, long pageBytes, Cluster cluster) throws IOException, InterruptedException {
        return launch(dir, pageBytes, cluster.options());
    }

    /**
     * As {@link #start(Path, long, Cluster)}, with {@code extraOptions} appended to the command
     * line (for instance {@code --set kvEventsEndpoint=tcp://127.0.0.1:P}); a later option wins.
     */
    public static ManagerLauncher start(Path dir, long pageBytes, Cluster cluster, List<String> extraOptions)
            throws IOException, InterruptedException {
        List<String> options = new ArrayList<>(cluster.options());
        options.addAll(extraOptions);
        return launch(dir, pageBytes, options);
    }

    private static ManagerLauncher launch(Path dir, long pageBytes, List<String> extraOptions)
            throws IOException, InterruptedException {
        long slotBytes = Math.max(MIN_SLOT_BYTES, Long.highestOneBit(Math.max(1, pageBytes - 1)) << 1);
        long dramBytes = DRAM_SLOTS * slotBytes;
        Files.createDirectories(dir);
        Path ready = dir.resolve("ready");
        Files.deleteIfExists(ready);
        List<String> cmd = new ArrayList<>();
        cmd.add(ProcessHandle.current().info().command().orElse(Path.of(System.getProperty("java.home"), "bin", "java").toString()));
        cmd.addAll(List.of("--enable-native-access=ALL-UNNAMED", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                "-cp", System.getProperty("java.class.path"), "io.orbitkv.server.cli.OrbitKvCli", "manager",
                "--ssd-dir", dir.resolve("ssd").toString(), "--dram-dir", dir.resolve("dram").toString(),
                "--socket", socket(dir).toString(), "--http", "0", "--ready-file", ready.toString(),
                "--dram-bytes", dramBytes / 1024 + "k", "--ssd-bytes", 4 * dramBytes / 1024 + "k",
                "--ssd-policy", "write-through", "--set", "dramSlotBytes=" + slotBytes / 1024 + "k"));
        cmd.addAll(extraOptions);
        Process p = new ProcessBuilder(cmd).redirectError(dir.resolve("manager.err").toFile())
                .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        long deadline = System.nanoTime() + START_TIMEOUT.toNanos();
        while (!Files.exists(ready) || Files.readString(ready).isBlank()) {
            if (!p.isAlive()) throw new IOException("the Manager exited " + p.exitValue() + ": " + stderr(dir));
            if (System.nanoTime() > deadline) {
                p.destroyForcibly();
                throw new IOException("the Manager was not ready within " + START_TIMEOUT + ": " + stderr(dir));
            }
            p.waitFor(20, TimeUnit.MILLISECONDS);
        }
        String line = Files.readString(ready);
        Matcher m = HTTP.matcher(line);
        Matcher c = CLUSTER.matcher(line);
        return new ManagerLauncher(dir, p, m.find() ? Integer.parseInt(m.group(1)) : -1, c.find() ? c.group(1) : "");
    }

    /** The engine socket of a Manager over {@code dir}. */
    public static Path socket(Path dir) {
        return dir.resolve("m.sock");
    }

    public Path socket() {
        return socket(dir);
    }

    /** {@code host:port} of this member's cluster endpoint (from its ready line); empty when not clustered. */
    public String clusterEndpoint() {
        return clusterEndpoint;
    }

    /** The SSD store directory (extent files). */
    public Path ssdDir() {
        return dir.resolve("ssd");
    }

    /** The value of the first {@code /metrics} sample starting with {@code prefix}; 0 when absent. */
    public double metric(String prefix) {
        if (httpPort < 0) return 0;
        for (String line : get("/metrics").split("\n")) {
            if (line.startsWith(prefix)) return Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
        }
        return 0;
    }

    /** The {@code /status} JSON document (docs/operations.md, "HTTP endpoint"). */
    public String status() {
        if (httpPort < 0) throw new IllegalStateException("the Manager's ready line named no HTTP port");
        return get("/status");
    }

    /**
     * Waits until this clustered Manager's membership view is valid with {@code liveMembers}
     * members, checking every 20 ms for at most {@code timeout}; false when it did not get there
     * (or the process exited).
     */
    public boolean awaitView(int liveMembers, Duration timeout) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (process.isAlive() && System.nanoTime() < deadline) {
            if (metric("orbitkv_membership_valid") == 1 && metric("orbitkv_membership_live") == liveMembers) return true;
            process.waitFor(20, TimeUnit.MILLISECONDS);
        }
        return false;
    }

    private String get(String path) {
        try {
            HttpResponse<String> r = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
                    URI.create("http://127.0.0.1:" + httpPort + path)).timeout(Duration.ofSeconds(10)).build(),
                    HttpResponse.BodyHandlers.ofString());
            if (r.statusCode() != 200) throw new IllegalStateException(path + " answered " + r.statusCode());
            return r.body();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /** The Manager's stderr so far. */
    public String stderr() {
        return stderr(dir);
    }

    private static String stderr(Path dir) {
        try {
            return Files.readString(dir.resolve("manager.err"));
        } catch (IOException e) {
            return "(no stderr: " + e + ")";
        }
    }

    /** SIGTERM, then wait for the exit; returns the exit status. */
    public int stop() {
        process.destroy();
        try {
            if (!process.waitFor(60, TimeUnit.SECONDS)) process.destroyForcibly().waitFor();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // the caller sees the interrupt; the process is killed
            process.destroyForcibly();
            return -1;
        }
        return process.exitValue();
    }

    @Override
    public void close() {
        if (process.isAlive()) stop();
    }
}
