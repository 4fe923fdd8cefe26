package io.orbitkv.bench.storage;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

class BenchRowTest {

    @Test
    void ratioTargetsAreLowerBounds() {
        BenchRow met = new BenchRow("x", "1", "1", 0.95, BenchRow.Target.atLeast(0.95));
        BenchRow missed = new BenchRow("x", "1", "1", 0.949, BenchRow.Target.atLeast(0.95));
        assertThat(met.met()).isTrue();
        assertThat(missed.met()).isFalse();
        assertThat(missed.markdown()).isEqualTo("| x | 1 | 1 | 0.949 | ≥ 0.95 | **no** |");
    }

    @Test
    void byteBudgetsAreUpperBounds() {
        BenchRow row = new BenchRow("heap", "196.0 B", "budget", 196.04, BenchRow.Target.atMost(256, "B"));
        assertThat(row.met()).isTrue();
        assertThat(row.markdown()).isEqualTo("| heap | 196.0 B | budget | 196.0 B | ≤ 256 B | yes |");
        assertThat(new BenchRow("heap", "", "", 256.5, BenchRow.Target.atMost(256, "B")).met()).isFalse();
    }

    @Test
    void rowsHaveTheHeadersColumnCount() {
        long columns = BenchRow.HEADER.lines().findFirst().orElseThrow().chars().filter(c -> c == '|').count();
        String row = new BenchRow("a", "b", "c", 1, BenchRow.Target.atLeast(0.9)).markdown();
        assertThat(row.chars().filter(c -> c == '|').count()).isEqualTo(columns);
    }
}
