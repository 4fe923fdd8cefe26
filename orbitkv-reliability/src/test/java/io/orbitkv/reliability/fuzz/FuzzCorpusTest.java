package io.orbitkv.reliability.fuzz;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The committed fuzz corpora ({@code src/test/resources/fuzz/<target>/}) replayed through every
 * target in this JVM, as {@code bin/reliability fuzz --replay} does: each input must decode or be
 * refused as its codec documents; the regression inputs of past findings are among them.
 */
class FuzzCorpusTest {

    private static final Path CORPUS = Path.of("src", "test", "resources", "fuzz");

    @Test
    void everyCommittedInputOfEveryTargetIsHandledAsItsCodecDocuments() throws Exception {
        for (Map.Entry<String, FuzzTarget> t : FuzzCampaign.TARGETS.entrySet()) {
            Path dir = CORPUS.resolve(t.getKey());
            assertThat(dir).as("committed corpus of %s", t.getKey()).isDirectory();
            long files;
            try (var list = Files.list(dir)) {
                files = list.count();
            }
            int replayed = FuzzCampaign.replay(t.getValue(), dir);
            assertThat(replayed).as(t.getKey()).isEqualTo(files + t.getValue().seeds().size());
            assertThat(files).as("%s has more than its seeds", t.getKey()).isGreaterThanOrEqualTo(t.getValue().seeds().size());
        }
    }

    @Test
    void aBrokenPropertyIsAFinding() {
        assertThatThrownBy(() -> FuzzTarget.check(false, "round trip")).isInstanceOf(AssertionError.class).hasMessage("round trip");
    }

    @Test
    void thePastFindingsStayFixed() throws Exception {
        for (String finding : new String[] {"finding-page-refused-reserved-byte", "finding-node-id-not-utf8", "finding-negative-generation"}) {
            byte[] input = Files.readAllBytes(CORPUS.resolve("peer").resolve(finding));
            FuzzCampaign.TARGETS.get("peer").fuzzOne(input);
        }
    }
}
