package io.orbitkv.state.unix;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.stream.Stream;

/**
 * Removal of a whole directory tree, as the benchmarks, the demo and the reliability drivers
 * clean up their work and shared-memory directories. Stateless.
 */
public final class FileTrees {

    private FileTrees() {
    }

    /** Deletes {@code root} and everything under it, deepest first; nothing when it does not exist. */
    public static void delete(Path root) throws IOException {
        if (!Files.exists(root)) return;
        try (Stream<Path> paths = Files.walk(root)) {
            for (Path p : paths.sorted(Comparator.reverseOrder()).toList()) Files.deleteIfExists(p);
        }
    }
}
