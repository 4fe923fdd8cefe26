package io.orbitkv.testkit;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A real Manager ({@code orbitkv manager}) as a child JVM on this JVM's class path (or from a
 * Manager jar), with its files under one directory: {@code ssd/}, {@code dram/} (unless the DRAM
 * directory is set elsewhere), {@code m.sock}, {@code ready} and one {@code manager-*.err} per
 * start. Used by the server's process tests, the engine adapters' tests and demo, and the
 * benchmarks; each names its own sizes as {@code orbitkv manager} options.
 *
 * <p>Owns the child process. Thread model: {@link Launch#start}, {@link #terminate}, {@link #kill}
 * and {@link #close} from one owner thread; the HTTP reads from any thread. {@link Launch#start}
 * returns once the ready file holds the ready line (the Manager writes it atomically once it
 * serves), watched every 20 ms against a deadline (60 s unless set); a Manager that exits first,
 * or is not ready by then, fails the start with its stderr.
 *
 * <p>Design note: a separate process, not an in-JVM daemon, so "the Manager restarts" is a real
 * process exit with its arenas unmapped and its SSD store reopened and recovered from disk, and a
 * signal reaches the CLI as it reaches a deployed Manager. JDK only (the HTTP client, no JSON
 * library), so that this module stays a light dependency of main code too.
 */
public final class ManagerProcess implements AutoCloseable {

    private static final Pattern HTTP = Pattern.compile("http=(\\S+):(\\d+)");
    private static final Pattern CLUSTER = Pattern.compile("cluster=(\\S+) node=(\\S+) incarnation=(\\d+)");
    private static final HttpClient HTTP_CLIENT = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    /** JVM options unless {@link Launch#jvm} sets others: a small heap and a quick start (C1 only, serial GC). */
    public static final List<String> TEST_JVM = List.of("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC");

    private final Path dir;
    private final Process process;
    private final Path stderr;
    private final String readyLine;
    private final String httpHost;
    private final int httpPort;
    private final String clusterEndpoint;
    private final long incarnation;

    private ManagerProcess(Path dir, Process process, Path stderr, String readyLine) {
        this.dir = dir;
        this.process = process;
        this.stderr = stderr;
        this.readyLine = readyLine;
        Matcher http = HTTP.matcher(readyLine);
        boolean served = http.find();
        this.httpHost = served ? http.group(1) : "";
        this.httpPort = served ? Integer.parseInt(http.group(2)) : -1;
        Matcher cluster = CLUSTER.matcher(readyLine);
        boolean clustered = cluster.find();
        this.clusterEndpoint = clustered ? cluster.group(1) : "";
        this.incarnation = clustered ? Long.parseLong(cluster.group(3)) : 0;
    }

    /** A launch of a Manager over {@code dir}; set what differs from the defaults, then {@link Launch#start}. */
    public static Launch over(Path dir) {
        return new Launch(dir);
    }

    /** The engine socket of a Manager over {@code dir}. */
    public static Path socket(Path dir) {
        return dir.resolve("m.sock");
    }

    /** The SSD store directory of a Manager over {@code dir}. */
    public static Path ssdDir(Path dir) {
        return dir.resolve("ssd");
    }

    /** The default DRAM directory (lock file) of a Manager over {@code dir}. */
    public static Path dramDir(Path dir) {
        return dir.resolve("dram");
    }

    /** Writes a cluster token to {@code file}, mode 0600 as docs/operations.md asks, and returns the file. */
    public static Path writeClusterToken(Path file) throws IOException {
        Files.writeString(file, "orbitkv-test-cluster-token-0123456789\n");
        return Files.setPosixFilePermissions(file, java.nio.file.attribute.PosixFilePermissions.fromString("rw-------"));
    }

    /**
     * Options making a Manager member {@code nodeId} of cluster {@code clusterId} at etcd
     * {@code etcd}: the shared token file, a free loopback cluster port, and a 2 s lease (a stopped
     * member leaves a view within seconds) with a 1 s catalog lookup deadline.
     */
    public static List<String> clusterOptions(String etcd, String clusterId, String nodeId, Path tokenFile) {
        return List.of("--etcd", etcd, "--node-id", nodeId, "--cluster-id", clusterId,
                "--cluster-token-file", tokenFile.toString(), "--cluster-listen", "127.0.0.1:0",
                "--set", "clusterLeaseTtlMillis=2000", "--set", "clusterLookupTimeoutMillis=1000");
    }

    /** What to start: everything but the directory has a default. Not thread-safe. */
    public static final class Launch {
        private final Path dir;
        private List<String> jvm = TEST_JVM;
        private List<String> main = List.of("-cp", System.getProperty("java.class.path"), "io.orbitkv.server.cli.OrbitKvCli");
        private Path dramDir;
        private List<String> prefix = List.of();
        private Map<String, String> environment = Map.of();
        private final List<String> options = new ArrayList<>();
        private Duration readyTimeout = Duration.ofSeconds(60);

        private Launch(Path dir) {
            this.dir = Objects.requireNonNull(dir, "dir");
            this.dramDir = ManagerProcess.dramDir(dir);
        }

        /** JVM options instead of {@link #TEST_JVM} (heap, GC, flight recorder...). */
        public Launch jvm(List<String> jvmOptions) {
            this.jvm = List.copyOf(jvmOptions);
            return this;
        }

        /** Runs {@code java -jar managerJar} instead of the CLI on this JVM's class path. */
        public Launch jar(Path managerJar) {
            this.main = List.of("-jar", managerJar.toString());
            return this;
        }

        /** The DRAM directory (lock file), instead of {@code <dir>/dram}. */
        public Launch dramDir(Path dramDir) {
            this.dramDir = Objects.requireNonNull(dramDir, "dramDir");
            return this;
        }

        /** A command prefix such as {@code setpriv ... --}, run before {@code java}. */
        public Launch prefix(List<String> command) {
            this.prefix = List.copyOf(command);
            return this;
        }

        /** Variables added to this process's environment. */
        public Launch environment(Map<String, String> variables) {
            this.environment = Map.copyOf(variables);
            return this;
        }

        /** {@code orbitkv manager} options appended after the layout's (a later option wins). */
        public Launch options(List<String> managerOptions) {
            options.addAll(managerOptions);
            return this;
        }

        /** As {@link #options(List)}. */
        public Launch options(String... managerOptions) {
            return options(List.of(managerOptions));
        }

        /** How long {@link #start} waits for the ready line. */
        public Launch readyTimeout(Duration timeout) {
            this.readyTimeout = Objects.requireNonNull(timeout, "timeout");
            return this;
        }

        /** The full command line, prefix included. */
        public List<String> command() {
            List<String> cmd = new ArrayList<>(prefix);
            cmd.add(ProcessHandle.current().info().command()
                    .orElse(Path.of(System.getProperty("java.home"), "bin", "java").toString()));
            cmd.add("--enable-native-access=ALL-UNNAMED");
            cmd.addAll(jvm);
            cmd.addAll(main);
            cmd.addAll(List.of("manager", "--ssd-dir", ssdDir(dir).toString(), "--dram-dir", dramDir.toString(),
                    "--socket", socket(dir).toString(), "--http", "0", "--ready-file", dir.resolve("ready").toString()));
            cmd.addAll(options);
            return cmd;
        }

        /** Starts the Manager and waits for its ready line; see the class comment. */
        public ManagerProcess start() throws IOException {
            Files.createDirectories(dir);
            Path ready = dir.resolve("ready");
            Files.deleteIfExists(ready);
            Path err = Files.createTempFile(dir, "manager-", ".err");
            ProcessBuilder builder = new ProcessBuilder(command()).redirectError(err.toFile())
                    .redirectOutput(ProcessBuilder.Redirect.DISCARD);
            builder.environment().putAll(environment);
            Process p = ChildProcesses.adopt(builder.start());
            long deadline = System.nanoTime() + readyTimeout.toNanos();
            String line;
            try {
                while (!(line = readyLine(ready)).contains("pid=")) {
                    if (!p.isAlive()) throw new IOException("the Manager exited " + p.exitValue() + ": " + Files.readString(err));
                    if (System.nanoTime() > deadline) {
                        p.destroyForcibly().waitFor();
                        throw new IOException("the Manager was not ready within " + readyTimeout + ": " + Files.readString(err));
                    }
                    p.waitFor(20, TimeUnit.MILLISECONDS);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                p.destroyForcibly();
                throw new IOException("interrupted while the Manager started", e);
            }
            return new ManagerProcess(dir, p, err, line);
        }

        private static String readyLine(Path ready) throws IOException {
            try {
                return Files.readString(ready);
            } catch (NoSuchFileException e) {
                return "";
            }
        }
    }

    /** The directory this Manager's files are under. */
    public Path dir() {
        return dir;
    }

    /** The child process. */
    public Process process() {
        return process;
    }

    public long pid() {
        return process.pid();
    }

    public boolean isAlive() {
        return process.isAlive();
    }

    /** The engine socket. */
    public Path socket() {
        return socket(dir);
    }

    /** The SSD store directory (extent files). */
    public Path ssdDir() {
        return ssdDir(dir);
    }

    /** The ready line the Manager wrote. */
    public String readyLine() {
        return readyLine;
    }

    /** The HTTP port from the ready line; -1 when it named none. */
    public int httpPort() {
        return httpPort;
    }

    /** {@code host:port} of the cluster endpoint (from the ready line); empty for a single-node Manager. */
    public String clusterEndpoint() {
        return clusterEndpoint;
    }

    /** This run's cluster incarnation (from the ready line); 0 for a single-node Manager. */
    public long incarnation() {
        return incarnation;
    }

    /** GET {@code path} on the Manager's HTTP endpoint: the body; IllegalStateException unless 200. */
    public String get(String path) {
        if (httpPort < 0) throw new IllegalStateException("the Manager's ready line named no HTTP port: " + readyLine);
        try {
            HttpResponse<String> r = HTTP_CLIENT.send(HttpRequest.newBuilder(URI.create("http://" + httpHost + ":" + httpPort + path))
                    .timeout(Duration.ofSeconds(10)).build(), HttpResponse.BodyHandlers.ofString());
            if (r.statusCode() != 200) throw new IllegalStateException(path + " answered " + r.statusCode() + ": " + r.body());
            return r.body();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /** The {@code /status} JSON document, as text (docs/operations.md, "HTTP endpoint"). */
    public String status() {
        return get("/status");
    }

    /** The {@code /metrics} page (Prometheus text). */
    public String metrics() {
        return get("/metrics");
    }

    /** The value of the first {@code /metrics} sample line that starts with {@code prefix}; 0 when none. */
    public double metric(String prefix) {
        for (String line : metrics().split("\n")) {
            if (line.startsWith(prefix)) return Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
        }
        return 0;
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

    /** This run's stderr file. */
    public Path stderrFile() {
        return stderr;
    }

    /** This run's stderr so far. */
    public String stderr() {
        try {
            return Files.readString(stderr);
        } catch (IOException e) {
            return "(no stderr: " + e + ")";
        }
    }

    /**
     * SIGTERM; the exit status once the Manager has drained (60 s at most, then SIGKILL and -1;
     * -1 too when interrupted, with the interrupt kept and the process killed).
     */
    public int terminate() {
        process.destroy();
        try {
            if (process.waitFor(60, TimeUnit.SECONDS)) return process.exitValue();
            process.destroyForcibly().waitFor();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // the caller sees the interrupt; the process is killed
            process.destroyForcibly();
        }
        return -1;
    }

    /** SIGTERM; fails, with the Manager's stderr, unless it drains and exits 0 within 60 s. */
    public void stop() throws IOException {
        int exit = terminate();
        if (exit != 0) throw new IOException("the Manager exited " + exit + " on SIGTERM: " + stderr());
    }

    /** SIGKILL, then waits (10 s at most) until the process is gone and its locks are free. */
    public void kill() throws IOException, InterruptedException {
        process.destroyForcibly();
        if (!process.waitFor(10, TimeUnit.SECONDS)) throw new IOException("the Manager " + pid() + " survived SIGKILL for 10 s");
    }

    /** SIGTERM if still running, SIGKILL after 30 s. */
    @Override
    public void close() {
        if (!process.isAlive()) return;
        process.destroy();
        try {
            if (!process.waitFor(30, TimeUnit.SECONDS)) process.destroyForcibly().waitFor();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // close() keeps the interrupt for the caller
            process.destroyForcibly();
        }
    }
}
