package io.orbitkv.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.orbitkv.testkit.ManagerProcess;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * Starts the Manager a benchmark run measures ({@link ManagerProcess}): from this JVM's class
 * path (the shaded bench jar contains the server, and so does a test class path) or from a given
 * Manager jar, with its SSD files, socket, ready file and stderr under one directory and its DRAM
 * lock file under a tmpfs directory ({@code <shmDir>/arenas}); {@code shmDir} itself is the
 * Manager's {@code regionDir}, so the benchmark's REGISTER_REGION files go anywhere in it outside
 * {@code arenas/}. A run ends with {@link ManagerProcess#stop()}, which fails unless the Manager
 * drains and exits 0. Stateless.
 */
public final class BenchManager {

    private static final ObjectMapper JSON = new ObjectMapper();

    private BenchManager() {
    }

    /**
     * Starts a Manager over {@code dir} with its arenas in {@code shmDir}, a {@code heap} (e.g.
     * {@code 1g}) and {@code options} of {@code orbitkv manager} ({@code --dram-bytes}, {@code --set k=v}).
     */
    public static ManagerProcess start(Path dir, Path shmDir, String heap, List<String> options) throws IOException {
        return launch(dir, shmDir, heap, options).start();
    }

    /** As {@link #start}, running {@code managerJar} ({@code java -jar}) with a 1 GiB heap. */
    public static ManagerProcess startJar(Path managerJar, Path dir, Path shmDir, List<String> options) throws IOException {
        return launch(dir, shmDir, "1g", options).jar(managerJar).start();
    }

    /** The Manager's {@code /status} JSON. */
    public static JsonNode status(ManagerProcess manager) throws IOException {
        return JSON.readTree(manager.status());
    }

    private static ManagerProcess.Launch launch(Path dir, Path shmDir, String heap, List<String> options) throws IOException {
        Files.createDirectories(shmDir);
        return ManagerProcess.over(dir).jvm(List.of("-XX:+UseG1GC", "-Xmx" + heap)).dramDir(shmDir.resolve("arenas"))
                .options("--set", "regionDir=" + shmDir).options(options);
    }
}
