package io.orbitkv.llamacpp;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/** Extraction of the bundled library: once per cache directory, same path on reuse, no temporaries left. */
class LlamaCppLibraryTest {

    @Test
    void extractsOnceAndReusesTheFile(@TempDir Path cache) throws Exception {
        Path first = LlamaCppLibrary.extract(cache);
        long modified = Files.getLastModifiedTime(first).toMillis();
        Path again = LlamaCppLibrary.extract(cache);
        assertThat(again).isEqualTo(first);
        assertThat(Files.getLastModifiedTime(again).toMillis()).isEqualTo(modified);
        assertThat(Files.size(first)).isGreaterThan(1_000_000);
        try (var files = Files.list(first.getParent())) {
            assertThat(files.map(f -> f.getFileName().toString())).containsExactly("libjllama.so");
        }
    }
}
