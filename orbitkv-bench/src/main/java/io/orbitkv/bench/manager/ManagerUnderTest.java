package io.orbitkv.bench.manager;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A real Manager process ({@code java -jar orbitkv.jar manager}) with every file under one
 * temporary directory and its DRAM arenas under a tmpfs directory: started, awaited on its ready
 * file, stopped with SIGTERM. Owns the process and deletes nothing it did not create.
 *
 * <p>Thread model: one owner thread. The ready file is polled every 10 ms for at most 60 s (the
 * Manager writes it once its socket is bound; a JVM with a 1.5 GiB arena starts in about 1 s).
 */
final class ManagerUnderTest implements AutoCloseable {

    private final Process process;
    private final Path socket;
    private final Path log;

    private ManagerUnderTest(Process process, Path socket, Path log) {
        this.process = process;
        this.socket = socket;
        this.log = log;
    }

    /**
     * Starts {@code managerJar} over {@code dir} (SSD files, socket, ready file, log) with its arenas in
     * {@code shmDir}, {@code dramBytes} of DRAM in the default slot classes (64 KiB, 256 KiB, 2 MiB).
     */
    static ManagerUnderTest start(Path managerJar, Path dir, Path shmDir, String dramBytes) throws IOException,
            InterruptedException {
        Files.createDirectories(dir);
        Files.createDirectories(shmDir);
        Path ready = dir.resolve("ready");
        Path socket = dir.resolve("m.sock");
        Path log = dir.resolve("manager.log");
        Files.deleteIfExists(ready);
        List<String> cmd = new ArrayList<>(List.of(
                ProcessHandle.current().info().command().orElse("java"), "--enable-native-access=ALL-UNNAMED",
                "-XX:+UseG1GC", "-Xmx1g", "-jar", managerJar.toString(), "manager",
                "--ssd-dir", dir.resolve("ssd").toString(), "--ssd-bytes", "512m",
                "--dram-dir", shmDir.toString(), "--dram-bytes", dramBytes,
                "--socket", socket.toString(), "--http", "0", "--ready-file", ready.toString()));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (!Files.exists(ready)) {
            if (!p.isAlive()) throw new IOException("the Manager exited " + p.exitValue() + ": " + Files.readString(log));
            if (System.nanoTime() > deadline) {
                p.destroyForcibly();
                throw new IOException("the Manager did not get ready in 60 s: " + Files.readString(log));
            }
            Thread.sleep(10);
        }
        return new ManagerUnderTest(p, socket, log);
    }

    Path socket() {
        return socket;
    }

    long pid() {
        return process.pid();
    }

    /** SIGTERM, then the exit status (the Manager drains and exits 0). */
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
    }
}
