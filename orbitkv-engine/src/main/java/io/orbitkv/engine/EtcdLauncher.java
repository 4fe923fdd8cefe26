package io.orbitkv.engine;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A single-member etcd ({@code /usr/bin/etcd}) started as a child process on free loopback ports,
 * with its data directory and {@code etcd.log} under one directory: the membership store of the
 * clustered {@link ManagerLauncher}s of the handoff tests and the TTFT bench's cross-host arm.
 *
 * <p>Owns the child process. Thread model: confined to its creator. {@link #start} returns once
 * the client port accepts a connection (checked every 50 ms against a deadline), and fails with
 * the log's path if etcd exits first.
 *
 * <p>Design note: a real etcd rather than an in-JVM fake, so membership, leases and watches are
 * the production code paths. One member on loopback is enough: the tests and the bench need
 * etcd's semantics, not its fault tolerance. Data is kept across {@link #close()} only because
 * the caller owns {@code dir}; nothing here restarts etcd (the server's outage tests do that with
 * their own launcher).
 */
public final class EtcdLauncher implements AutoCloseable {

    /** Where the packaged etcd server is installed. */
    public static final Path BINARY = Path.of("/usr/bin/etcd");
    private static final Duration START_TIMEOUT = Duration.ofSeconds(30);

    private final Process process;
    private final int clientPort;

    private EtcdLauncher(Process process, int clientPort) {
        this.process = process;
        this.clientPort = clientPort;
    }

    /** True when {@link #BINARY} exists and is executable. */
    public static boolean installed() {
        return Files.isExecutable(BINARY);
    }

    /** Starts etcd with its data and {@code etcd.log} under {@code dir} and waits until it accepts clients. */
    public static EtcdLauncher start(Path dir) throws IOException, InterruptedException {
        if (!installed()) throw new IOException("etcd is not installed at " + BINARY + " (apt-get install etcd-server)");
        Files.createDirectories(dir);
        int clientPort = freePort();
        int peerPort = freePort();
        String client = "http://127.0.0.1:" + clientPort;
        String peer = "http://127.0.0.1:" + peerPort;
        Path log = dir.resolve("etcd.log");
        Process p = new ProcessBuilder(List.of(BINARY.toString(), "--name", "launcher",
                "--data-dir", dir.resolve("etcd-data").toString(),
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", "launcher=" + peer, "--log-level", "warn"))
                .redirectErrorStream(true).redirectOutput(log.toFile()).start();
        long deadline = System.nanoTime() + START_TIMEOUT.toNanos();
        while (!accepts(clientPort)) {
            if (!p.isAlive()) throw new IOException("etcd exited " + p.exitValue() + "; see " + log);
            if (System.nanoTime() > deadline) {
                p.destroyForcibly().waitFor();
                throw new IOException("etcd did not accept clients within " + START_TIMEOUT + "; see " + log);
            }
            p.waitFor(50, TimeUnit.MILLISECONDS);
        }
        return new EtcdLauncher(p, clientPort);
    }

    /** The client URL, e.g. {@code http://127.0.0.1:41234}. */
    public String endpoint() {
        return "http://127.0.0.1:" + clientPort;
    }

    private static boolean accepts(int port) {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 200);
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

    /** SIGTERM, then SIGKILL after 10 s; waits for the exit. */
    @Override
    public void close() {
        if (!process.isAlive()) return;
        process.destroy();
        try {
            if (!process.waitFor(10, TimeUnit.SECONDS)) process.destroyForcibly().waitFor();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // close() keeps the interrupt for the caller
            process.destroyForcibly();
        }
    }
}
