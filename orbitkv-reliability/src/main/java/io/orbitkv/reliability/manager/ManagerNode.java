package io.orbitkv.reliability.manager;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
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
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * One real Manager process ({@code orbitkv manager}) of a campaign run, started from this JVM's
 * {@code java} and class path (the reliability jar contains the server; so does a test class path)
 * over a directory that outlives it: {@code ssd/} (the store a restarted Manager recovers),
 * {@code m.sock}, {@code ready} and {@code manager.log}, with its DRAM arenas under a tmpfs
 * directory. Unlike the benchmark harness it can be killed with SIGKILL and started again on the
 * same directories, and it reads what the campaign checks: {@code /status}, {@code /metrics}
 * sums and the process's resident set ({@code /proc/<pid>/status VmRSS}).
 *
 * <p>Thread model: {@link #start}, {@link #kill} and {@link #terminate} from one owner thread;
 * the HTTP and {@code /proc} reads from any thread. Start waits for the ready file (which the
 * Manager writes once it serves), polled every 10 ms for at most 60 s; a Manager that exits first
 * fails the start with the end of its log.
 */
public final class ManagerNode {

    private static final Pattern HTTP = Pattern.compile("http=127\\.0\\.0\\.1:(\\d+)");
    private static final HttpClient HTTP_CLIENT = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    private static final ObjectMapper JSON = new ObjectMapper();
    // a JVM start plus SSD recovery took 8-17 s at load average 30 on two cores; 120 s is a hang
    private static final long READY_TIMEOUT_NANOS = TimeUnit.SECONDS.toNanos(120);

    private final Process process;
    private final Path dir;
    private final int httpPort;

    private ManagerNode(Process process, Path dir, int httpPort) {
        this.process = process;
        this.dir = dir;
        this.httpPort = httpPort;
    }

    /**
     * Starts a Manager over {@code dir} (SSD store, socket, log) and {@code shmDir} (arenas) with
     * {@code heap} (e.g. {@code 256m}) and {@code options} of {@code orbitkv manager}
     * ({@code --dram-bytes}, {@code --set k=v}, ...); returns once it serves.
     */
    public static ManagerNode start(Path dir, Path shmDir, String heap, List<String> options)
            throws IOException, InterruptedException {
        Files.createDirectories(dir);
        Files.createDirectories(shmDir);
        Path ready = dir.resolve("ready");
        Files.deleteIfExists(ready);
        List<String> cmd = new ArrayList<>(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-XX:+UseSerialGC", "-Xms" + heap, "-Xmx" + heap,
                // the heap is committed and touched at start, so RSS growth later is the Manager's, not the heap's
                "-XX:+AlwaysPreTouch",
                "-cp", System.getProperty("java.class.path"), "io.orbitkv.server.cli.OrbitKvCli", "manager",
                "--ssd-dir", dir.resolve("ssd").toString(), "--dram-dir", shmDir.toString(),
                "--socket", socket(dir).toString(), "--http", "0", "--ready-file", ready.toString(),
                // the campaign's clients keep their region files in the run's work directory (dir or its parent)
                "--set", "regionDir=" + dir.toAbsolutePath().getParent()));
        cmd.addAll(options);
        Path log = dir.resolve("manager.log");
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile())).start();
        long deadline = System.nanoTime() + READY_TIMEOUT_NANOS;
        String line;
        while (!(line = readyLine(ready)).contains("pid=")) {
            if (!p.isAlive()) throw new IOException("the Manager exited " + p.exitValue() + ": " + tail(log));
            if (System.nanoTime() > deadline) {
                Path threads = dir.resolve("manager-threads.txt");
                threadDump(p.pid(), threads);
                p.destroyForcibly().waitFor();
                throw new IOException("the Manager did not get ready in 120 s (its threads: " + threads + "): " + tail(log));
            }
            Thread.sleep(10);
        }
        Matcher m = HTTP.matcher(line);
        if (!m.find()) {
            p.destroyForcibly().waitFor();
            throw new IOException("no http port in the ready line: " + line);
        }
        return new ManagerNode(p, dir, Integer.parseInt(m.group(1)));
    }

    /** The channel socket of a Manager over {@code dir}. */
    public static Path socket(Path dir) {
        return dir.resolve("m.sock");
    }

    public Path socket() {
        return socket(dir);
    }

    public long pid() {
        return process.pid();
    }

    public boolean isAlive() {
        return process.isAlive();
    }

    /** SIGKILL, then waits (10 s at most) until the process is gone and its locks are free. */
    public void kill() throws IOException, InterruptedException {
        process.destroyForcibly();
        if (!process.waitFor(10, TimeUnit.SECONDS)) throw new IOException("the Manager " + pid() + " survived SIGKILL for 10 s");
    }

    /** SIGTERM; the exit status once the Manager has drained (60 s at most, then SIGKILL and -1). */
    public int terminate() throws InterruptedException {
        process.destroy();
        if (process.waitFor(60, TimeUnit.SECONDS)) return process.exitValue();
        process.destroyForcibly().waitFor();
        return -1;
    }

    /** The Manager's {@code /status} JSON. */
    public JsonNode status() throws IOException, InterruptedException {
        return JSON.readTree(get("/status"));
    }

    /** The Manager's {@code /metrics} (Prometheus text). */
    public String metrics() throws IOException, InterruptedException {
        return get("/metrics");
    }

    /**
     * The sum of every sample of series {@code name} whose label set contains each of
     * {@code labels} (e.g. {@code area="heap"}); 0 when there is none.
     */
    public static double sum(String metrics, String name, String... labels) {
        double total = 0;
        for (String line : metrics.split("\n")) {
            if (line.startsWith("#") || !line.startsWith(name)) continue;
            int space = line.lastIndexOf(' ');
            String series = line.substring(0, space);
            if (!series.equals(name) && !series.startsWith(name + "{")) continue;
            boolean match = true;
            for (String label : labels) match &= series.contains(label);
            if (match) total += Double.parseDouble(line.substring(space + 1));
        }
        return total;
    }

    /** The resident set of the Manager process in bytes ({@code VmRSS} of {@code /proc/<pid>/status}). */
    public long rssBytes() throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc", Long.toString(pid()), "status"))) {
            if (line.startsWith("VmRSS:")) {
                String[] f = line.substring(6).trim().split("\\s+");
                return Long.parseLong(f[0]) * 1024; // the kernel reports kB
            }
        }
        throw new IOException("no VmRSS in /proc/" + pid() + "/status");
    }

    /** The last 4 KiB of the Manager's log, for failure messages. */
    public String logTail() {
        return tail(dir.resolve("manager.log"));
    }

    private String get(String path) throws IOException, InterruptedException {
        HttpResponse<String> r = HTTP_CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + httpPort + path))
                .timeout(Duration.ofSeconds(10)).build(), HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() != 200) throw new IOException(path + " answered " + r.statusCode());
        return r.body();
    }

    private static String readyLine(Path ready) throws IOException {
        try {
            return Files.readString(ready);
        } catch (NoSuchFileException e) {
            return "";
        }
    }

    /** Best effort: {@code jcmd <pid> Thread.print} into {@code file}, so a start that hangs says where. */
    private static void threadDump(long pid, Path file) {
        try {
            Files.writeString(file, Jcmd.run(pid, "Thread.print"));
        } catch (IOException e) {
            System.err.println("could not dump the Manager's threads: " + e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static String tail(Path log) {
        try {
            String s = Files.readString(log);
            return s.length() <= 4096 ? s : s.substring(s.length() - 4096);
        } catch (IOException e) {
            return "(log unreadable: " + e + ")";
        }
    }
}
