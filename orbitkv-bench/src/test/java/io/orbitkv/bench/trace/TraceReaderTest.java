package io.orbitkv.bench.trace;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.io.StringReader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class TraceReaderTest {

    @TempDir
    Path dir;

    private static List<TraceRequest> read(String text) throws IOException {
        return TraceReader.read(new StringReader(text), "t.jsonl", 0, Integer.MAX_VALUE);
    }

    @Test
    void readsEveryFieldAndIgnoresUnknownOnesAndBlankLines() throws IOException {
        List<TraceRequest> t = read("""
                {"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2]}

                {"timestamp": 27, "input_length": 10, "output_length": 0, "hash_ids": [0], "note": "extra"}
                """);
        assertThat(t).hasSize(2);
        assertThat(t.get(0).timestampMs()).isZero();
        assertThat(t.get(0).inputLength()).isEqualTo(6758);
        assertThat(t.get(0).outputLength()).isEqualTo(500);
        assertThat(t.get(0).blocks()).isEqualTo(3);
        assertThat(t.get(0).block(2)).isEqualTo(2);
        assertThat(t.get(1).line()).as("line numbers count blank lines").isEqualTo(3);
        assertThat(t.get(1).timestampMs()).isEqualTo(27);
    }

    @Test
    void malformedLinesNameTheFileAndLine() {
        String ok = "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}\n";
        List<String[]> cases = List.of(
                new String[] {"{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1", "not valid JSON"},
                new String[] {"[1, 2]", "expected one JSON object"},
                new String[] {"{\"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}", "missing field \"timestamp\""},
                new String[] {"{\"timestamp\": 1.5, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}",
                    "\"timestamp\" must be an integer"},
                new String[] {"{\"timestamp\": 0, \"input_length\": 0, \"output_length\": 1, \"hash_ids\": [1]}",
                    "\"input_length\" must be >= 1"},
                new String[] {"{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": []}",
                    "\"hash_ids\" is empty"},
                new String[] {"{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": 7}",
                    "missing array field \"hash_ids\""},
                new String[] {"{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1, \"x\"]}",
                    "hash_ids[1] must be a non-negative integer"},
                new String[] {"{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [-3]}",
                    "hash_ids[0] must be a non-negative integer"});
        for (String[] c : cases) {
            assertThatThrownBy(() -> read(ok + ok + c[0] + "\n" + ok))
                    .as(c[0]).isInstanceOf(TraceReader.TraceFormatException.class)
                    .hasMessageStartingWith("t.jsonl:3: ").hasMessageContaining(c[1]);
        }
    }

    @Test
    void tooManyBlocksInOneRequestAreRefused() {
        StringBuilder ids = new StringBuilder();
        for (int i = 0; i <= TraceReader.MAX_BLOCKS_PER_REQUEST; i++) ids.append(i == 0 ? "" : ",").append(i);
        assertThatThrownBy(() -> read("{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": ["
                + ids + "]}")).hasMessageContaining("more than " + TraceReader.MAX_BLOCKS_PER_REQUEST);
    }

    @Test
    void skipAndLimitSelectASliceOfAFile() throws IOException {
        StringBuilder text = new StringBuilder();
        for (int i = 0; i < 10; i++) {
            text.append("{\"timestamp\": ").append(i * 1000).append(", \"input_length\": 512, \"output_length\": 1, "
                    + "\"hash_ids\": [").append(i).append("]}\n");
        }
        Path file = Files.writeString(dir.resolve("any-name.jsonl"), text);
        List<TraceRequest> slice = TraceReader.read(file, 3, 4);
        assertThat(slice).extracting(r -> r.block(0)).containsExactly(3L, 4L, 5L, 6L);
        assertThatThrownBy(() -> TraceReader.read(file, 10, 4)).hasMessageContaining("no requests after skipping 10");
    }

    @Test
    void theCommittedSliceReads() throws IOException {
        List<TraceRequest> t = TraceReader.read(TraceReplayTest.slice(), 0, Integer.MAX_VALUE);
        assertThat(t).hasSize(400);
        for (TraceRequest r : t) {
            assertThat(r.inputLength()).as("line %d: prompt fits its blocks", r.line())
                    .isGreaterThan((r.blocks() - 1) * 512L).isLessThanOrEqualTo(r.blocks() * 512L);
        }
    }
}
