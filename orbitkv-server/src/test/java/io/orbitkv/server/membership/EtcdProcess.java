package io.orbitkv.server.membership;

import io.orbitkv.testkit.Environment;


import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.awaitility.Awaitility;

/**
 * A real etcd server for tests: {@code /usr/bin/etcd} on free loopback ports with a temporary
 * data directory; {@link #stop()} and {@link #start()} keep both, so a restart recovers the same
 * data (leases included). Tests are skipped with a clear message only when the binary is missing
 * ({@code .ci/run} installs it, so CI never skips).
 */
public final class EtcdProcess implements AutoCloseable {

    public static final Path BINARY = Path.of("/usr/bin/etcd");

    private final Path dataDir;
    private final int clientPort;
    private final int peerPort;
    private Process process;

    private EtcdProcess(Path dataDir, int clientPort, int peerPort) {
        this.dataDir = dataDir;
        this.clientPort = clientPort;
        this.peerPort = peerPort;
    }

    /** Skips the calling test when etcd is not installed. */
    public static void requireInstalled() {
        Environment.require(Files.isExecutable(BINARY),
                "etcd at " + BINARY + " (apt-get install -y etcd-server; .ci/run does this)");
    }

    public static EtcdProcess start(Path workDir) throws IOException {
        requireInstalled();
        EtcdProcess etcd = new EtcdProcess(Files.createDirectories(workDir.resolve("etcd-data")), freePort(), freePort());
        etcd.start();
        return etcd;
    }

    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    /** (Re)starts the server on the same ports and data directory, waiting until it accepts. */
    public void start() throws IOException {
        String client = "http://127.0.0.1:" + clientPort;
        String peer = "http://127.0.0.1:" + peerPort;
        process = new ProcessBuilder(List.of(BINARY.toString(), "--name", "t", "--data-dir", dataDir.toString(),
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", "t=" + peer, "--log-level", "warn"))
                .redirectErrorStream(true)
                .redirectOutput(dataDir.resolveSibling("etcd.log").toFile())
                .start();
        Awaitility.await("etcd accepting on " + clientPort).atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(50))
                .until(() -> {
                    if (!process.isAlive()) throw new IllegalStateException("etcd exited: see " + dataDir.resolveSibling("etcd.log"));
                    try (Socket s = new Socket()) {
                        s.connect(new InetSocketAddress("127.0.0.1", clientPort), 200);
                        return true;
                    } catch (IOException e) {
                        return false;
                    }
                });
    }

    /** The client URL, e.g. {@code http://127.0.0.1:41234}. */
    public String endpoint() {
        return "http://127.0.0.1:" + clientPort;
    }

    /** Stops the server (SIGKILL: an outage, not a graceful leave) and waits for it to exit. */
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
}
