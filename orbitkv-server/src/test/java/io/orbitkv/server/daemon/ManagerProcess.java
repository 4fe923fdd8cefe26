package io.orbitkv.server.daemon;

import static org.awaitility.Awaitility.await;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A real Manager started as a separate JVM ({@code orbitkv manager}) on the test classpath, with
 * every file under one directory: {@code ssd/}, {@code dram/}, {@code m.sock}, {@code ready}; the
 * directory itself is the region directory (REGISTER_REGION files go directly in it).
 * {@link #start} returns once the ready file holds the ready line (awaited, never slept for).
 */
final class ManagerProcess implements AutoCloseable {

    private static final Pattern HTTP = Pattern.compile("http=127\\.0\\.0\\.1:(\\d+)");
    private static final Pattern CLUSTER = Pattern.compile("cluster=(\\S+) node=(\\S+) incarnation=(\\d+)");
    private static final HttpClient HTTP_CLIENT = HttpClient.newHttpClient();

    final Path dir;
    final Process process;
    final Path stderr;
    int httpPort;
    /** {@code host:port} of the cluster endpoint, empty for a single-node Manager. */
    String clusterEndpoint = "";
    long incarnation;

    private ManagerProcess(Path dir, Process process, Path stderr) {
        this.dir = dir;
        this.process = process;
        this.stderr = stderr;
    }

    static Path socket(Path dir) {
        return dir.resolve("m.sock");
    }

    static Path ssd(Path dir) {
        return dir.resolve("ssd");
    }

    static Path dram(Path dir) {
        return dir.resolve("dram");
    }

    /** The command line of a Manager over {@code dir} plus {@code extra} options. */
    static List<String> command(Path dir, String... extra) {
        List<String> cmd = new ArrayList<>();
        cmd.add(ProcessHandle.current().info().command().orElseThrow());
        cmd.addAll(List.of("--enable-native-access=ALL-UNNAMED", "-Xmx192m", "-XX:TieredStopAtLevel=1",
                "-XX:+UseSerialGC", "-Xshare:auto", "-cp", System.getProperty("java.class.path"),
                "io.orbitkv.server.cli.OrbitKvCli", "manager",
                "--ssd-dir", ssd(dir).toString(), "--dram-dir", dram(dir).toString(),
                "--socket", socket(dir).toString(), "--http", "0", "--ready-file", dir.resolve("ready").toString(),
                "--dram-bytes", "16m", "--ssd-bytes", "32m", "--set", "dramSlotBytes=64k",
                "--set", "regionDir=" + dir));
        cmd.addAll(List.of(extra));
        return cmd;
    }

    /**
     * Options making a Manager a cluster member: etcd, node id, token file, a free loopback
     * cluster port, and a 2 s lease so failures show within seconds.
     */
    static String[] clusterOptions(String etcd, String nodeId, Path tokenFile) {
        return new String[] {"--etcd", etcd, "--node-id", nodeId, "--cluster-id", "test",
            "--cluster-token-file", tokenFile.toString(), "--cluster-listen", "127.0.0.1:0",
            "--set", "clusterLeaseTtlMillis=2000", "--set", "clusterLookupTimeoutMillis=1000"};
    }

    /** Writes the cluster token file the members share under {@code dir}; returns its path. */
    static Path clusterToken(Path dir) throws IOException {
        Path token = Files.writeString(dir.resolve("token"), "test-cluster-token-0123456789\n");
        Files.setPosixFilePermissions(token, java.nio.file.attribute.PosixFilePermissions.fromString("rw-------"));
        return token;
    }

    /** Starts cluster member {@code nodeId} of etcd {@code etcd} over {@code parent/nodeId} and waits for it. */
    static ManagerProcess startMember(Path parent, String etcd, String nodeId, Path tokenFile) throws IOException {
        return start(parent.resolve(nodeId), clusterOptions(etcd, nodeId, tokenFile));
    }

    /** Waits (30 s each) until every one of {@code all} has a valid membership view of {@code live} members. */
    static void awaitMembers(List<ManagerProcess> all, int live) {
        for (ManagerProcess m : all) {
            await("membership converges on " + m.dir).atMost(Duration.ofSeconds(30)).until(() ->
                    m.metric("orbitkv_membership_valid") == 1 && m.metric("orbitkv_membership_live") == live);
        }
    }

    /** Starts a Manager and waits for its ready file. */
    static ManagerProcess start(Path dir, String... extra) throws IOException {
        return start(dir, List.of(), Map.of(), extra);
    }

    /**
     * Starts a Manager under {@code launcher} (a command prefix such as {@code setpriv ... --}; may be
     * empty) with {@code environment} added to this process's, and waits for its ready file.
     */
    static ManagerProcess start(Path dir, List<String> launcher, Map<String, String> environment, String... extra)
            throws IOException {
        Files.createDirectories(dir);
        Files.deleteIfExists(dir.resolve("ready"));
        Path err = Files.createTempFile(dir, "manager-", ".err");
        List<String> cmd = new ArrayList<>(launcher);
        cmd.addAll(command(dir, extra));
        ProcessBuilder builder = new ProcessBuilder(cmd).redirectError(err.toFile())
                .redirectOutput(ProcessBuilder.Redirect.DISCARD);
        builder.environment().putAll(environment);
        Process p = builder.start();
        ManagerProcess m = new ManagerProcess(dir, p, err);
        await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(20))
                .until(() -> !p.isAlive() || Files.exists(dir.resolve("ready")));
        if (!p.isAlive()) throw new AssertionError("the Manager exited " + p.exitValue() + ": " + m.stderrText());
        Matcher matcher = HTTP.matcher(Files.readString(dir.resolve("ready")));
        if (!matcher.find()) throw new AssertionError("no http= in the ready line");
        m.httpPort = Integer.parseInt(matcher.group(1));
        Matcher cluster = CLUSTER.matcher(Files.readString(dir.resolve("ready")));
        if (cluster.find()) {
            m.clusterEndpoint = cluster.group(1);
            m.incarnation = Long.parseLong(cluster.group(3));
        }
        return m;
    }

    String stderrText() {
        try {
            return Files.readString(stderr);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** GET {@code path} on the Manager's HTTP endpoint; the body (status 200 required). */
    String get(String path) {
        try {
            HttpResponse<String> r = HTTP_CLIENT.send(HttpRequest.newBuilder(
                    URI.create("http://127.0.0.1:" + httpPort + path)).timeout(Duration.ofSeconds(10)).build(),
                    HttpResponse.BodyHandlers.ofString());
            if (r.statusCode() != 200) throw new AssertionError(path + " answered " + r.statusCode());
            return r.body();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
    }

    /** The value of the first sample line of {@code /metrics} that starts with {@code prefix}; 0 if none. */
    double metric(String prefix) {
        for (String line : get("/metrics").split("\n")) {
            if (line.startsWith(prefix)) return Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
        }
        return 0;
    }

    /** Sends SIGTERM and returns the exit status. */
    int terminate() throws InterruptedException {
        process.destroy();
        if (!process.waitFor(60, TimeUnit.SECONDS)) throw new AssertionError("the Manager did not stop on SIGTERM");
        return process.exitValue();
    }

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
