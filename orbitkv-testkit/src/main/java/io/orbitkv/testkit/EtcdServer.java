package io.orbitkv.testkit;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A single-member etcd ({@code /usr/bin/etcd}) as a child process on free loopback ports, with
 * its data in {@code <dir>/etcd-data} and its output in {@code <dir>/etcd.log}: the membership
 * store of the clustered Managers of the server's process tests, the engine adapters' handoff
 * tests and the TTFT bench.
 *
 * <p>Owns the child process. Thread model: confined to its creator. {@link #start(Path)} skips the
 * calling test when etcd is not installed ({@link Environment#require}); it returns once the client
 * port accepts a connection (checked every 50 ms for at most 30 s) and fails with the log's path if
 * etcd exits first. {@link #stop()} is an outage (SIGKILL) that keeps the ports and the data, so
 * {@link #restart()} recovers the same keys and leases; {@link #close()} stops it for good.
 *
 * <p>Design note: a real etcd rather than an in-JVM fake, so membership, leases and watches run
 * the production code paths; one member on loopback is enough, since the tests need etcd's
 * semantics, not its fault tolerance.
 */
public final class EtcdServer implements AutoCloseable {

    /** Where the packaged etcd server is installed. */
    public static final Path BINARY = Path.of("/usr/bin/etcd");
    private static final Duration START_TIMEOUT = Duration.ofSeconds(30);

    private final Path dir;
    private final String host;
    private final List<String> prefix;
    private final int clientPort;
    private final int peerPort;
    private Process process;

    private EtcdServer(Path dir, String host, List<String> prefix, int clientPort, int peerPort) {
        this.dir = dir;
        this.host = host;
        this.prefix = List.copyOf(prefix);
        this.clientPort = clientPort;
        this.peerPort = peerPort;
    }

    /** True when {@link #BINARY} exists and is executable. */
    public static boolean installed() {
        return Files.isExecutable(BINARY);
    }

    /** Skips the calling test (fails it under {@link Environment#SWITCH}) when etcd is not installed. */
    public static void requireInstalled() {
        Environment.require(installed(), "etcd at " + BINARY + " (apt-get install -y etcd-server; .ci/run does this)");
    }

    /** Starts etcd with its data and log under {@code dir}; see the class comment. */
    public static EtcdServer start(Path dir) throws IOException {
        return start(dir, "127.0.0.1", List.of());
    }

    /**
     * As {@link #start(Path)}, listening on {@code host} (an address of the network namespace it
     * runs in) and started under {@code prefix} (e.g. {@code ip netns exec NAME}; may be empty).
     */
    public static EtcdServer start(Path dir, String host, List<String> prefix) throws IOException {
        requireInstalled();
        EtcdServer etcd = new EtcdServer(Files.createDirectories(dir), host, prefix, freePort(), freePort());
        etcd.restart();
        return etcd;
    }

    /** (Re)starts the server on the same ports and data directory, waiting until it accepts clients. */
    public void restart() throws IOException {
        if (process != null && process.isAlive()) throw new IllegalStateException("etcd is running");
        String client = endpoint();
        String peer = "http://" + host + ":" + peerPort;
        Path log = dir.resolve("etcd.log");
        List<String> command = new ArrayList<>(prefix);
        command.addAll(List.of(BINARY.toString(), "--name", "t", "--data-dir", dir.resolve("etcd-data").toString(),
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", "t=" + peer, "--log-level", "warn"));
        process = ChildProcesses.adopt(new ProcessBuilder(command).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile())).start());
        long deadline = System.nanoTime() + START_TIMEOUT.toNanos();
        try {
            while (!accepts(host, clientPort)) {
                if (!process.isAlive()) throw new IOException("etcd exited " + process.exitValue() + "; see " + log);
                if (System.nanoTime() > deadline) {
                    process.destroyForcibly().waitFor();
                    throw new IOException("etcd did not accept clients within " + START_TIMEOUT + "; see " + log);
                }
                process.waitFor(50, TimeUnit.MILLISECONDS);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            process.destroyForcibly();
            throw new IOException("interrupted while etcd started", e);
        }
    }

    /** The client URL, e.g. {@code http://127.0.0.1:41234}. */
    public String endpoint() {
        return "http://" + host + ":" + clientPort;
    }

    /** Stops the server with SIGKILL (an outage, not a graceful leave) and waits for it to exit. */
    public void stop() throws InterruptedException {
        if (process == null) return;
        process.destroyForcibly();
        process.waitFor();
        process = null;
    }

    @Override
    public void close() {
        try {
            stop();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // close() keeps the interrupt for the caller
            if (process != null) process.destroyForcibly();
        }
    }

    private static boolean accepts(String host, int port) {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(host, port), 200);
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }
}
