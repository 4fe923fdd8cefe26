package io.orbitkv.server.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/**
 * The shared vectors, the code and the doc agree: every output in
 * {@code docs/vectors/state-vectors.json} is what the Java implementation computes from the
 * file's inputs, the inputs are those {@link StateVectors} defines, and the JSON block embedded
 * in {@code docs/state-contract.md} is the file.
 */
class StateVectorsTest {

    static Path repoRoot() {
        Path dir = Path.of("").toAbsolutePath();
        while (dir != null && !Files.isRegularFile(dir.resolve("docs/vectors/state-vectors.json"))) dir = dir.getParent();
        assertThat(dir).as("repository root holding docs/vectors/state-vectors.json").isNotNull();
        return dir;
    }

    /** Re-read with plain number nodes: a tree built in code and one parsed from text compare equal. */
    static JsonNode plain(JsonNode node) throws Exception {
        return PLAIN.readTree(node.toString());
    }

    private static final ObjectMapper PLAIN = new ObjectMapper();

    static JsonNode vectorsFile() throws Exception {
        return StateJson.MAPPER.readTree(Files.readString(repoRoot().resolve("docs/vectors/state-vectors.json")));
    }

    @Test
    void everyOutputIsWhatTheCodeComputes() throws Exception {
        JsonNode file = vectorsFile();
        assertThat(plain(StateVectors.complete(file)))
                .as("vectors disagree with the code; if a derivation changed on purpose, regenerate: "
                        + "java -cp orbitkv-server/target/test-classes:orbitkv-server/target/orbitkv.jar "
                        + "io.orbitkv.server.cli.StateVectors docs/vectors/state-vectors.json")
                .isEqualTo(plain(file));
        assertThat(plain(StateVectors.complete(StateVectors.inputs()))).isEqualTo(plain(file));
    }

    @Test
    void theDocEmbedsTheVectorsFile() throws Exception {
        String doc = Files.readString(repoRoot().resolve("docs/state-contract.md"), StandardCharsets.UTF_8);
        int begin = doc.indexOf("<!-- state-vectors:begin -->");
        int end = doc.indexOf("<!-- state-vectors:end -->");
        assertThat(begin).isPositive();
        assertThat(end).isGreaterThan(begin);
        String block = doc.substring(begin, end);
        String json = block.substring(block.indexOf("```json") + "```json".length(), block.lastIndexOf("```"));
        assertThat(plain(StateJson.MAPPER.readTree(json))).isEqualTo(plain(vectorsFile()));
    }

    @Test
    void theDocsWorkedNamespaceDigestIsTheSampleVector() throws Exception {
        String doc = Files.readString(repoRoot().resolve("docs/state-contract.md"), StandardCharsets.UTF_8);
        JsonNode sample = vectorsFile().get("namespaces").get(0);
        assertThat(doc).contains("digest = `" + sample.get("digest").asText() + "`");
        // the annotated canonical bytes, digits only, are the vector's canonical_hex
        int from = doc.indexOf("4f4b4e53 01000000");
        String annotated = doc.substring(from, doc.indexOf("```", from));
        StringBuilder hex = new StringBuilder();
        for (String line : annotated.split("\n")) {
            for (String word : line.strip().split("\\s+")) {
                if (word.matches("[0-9a-f]+") && word.length() % 2 == 0) hex.append(word);
                else break;
            }
        }
        assertThat(hex.toString()).isEqualTo(sample.get("canonical_hex").asText());
    }
}
