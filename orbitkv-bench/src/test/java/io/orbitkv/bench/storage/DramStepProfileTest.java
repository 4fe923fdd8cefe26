package io.orbitkv.bench.storage;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/** The step profile runs a real tier, reads back what it put, and leaves no baseline file behind. */
class DramStepProfileTest {

    @TempDir
    Path dir;

    @Test
    void profilesEachConfigurationAndCleansUp() throws IOException {
        List<BenchRow> rows = DramStepProfile.run(new DramStepProfile.Options(dir, List.of(4096, 8192), List.of(4), 300, io.orbitkv.core.storage.dram.DramEviction.LRU));
        assertThat(rows).extracting(BenchRow::benchmark).containsExactly(
                "DRAM put+get step medians 4 KiB, lru, 4 resident", "DRAM put+get step medians 8 KiB, lru, 4 resident");
        for (BenchRow row : rows) {
            assertThat(row.subject()).matches("\\d+ ns copies \\+ \\d+ ns bookkeeping");
            assertThat(row.value()).isPositive();
        }
        try (var left = Files.list(dir)) {
            assertThat(left).as("baseline files are deleted").isEmpty();
        }
    }
}
