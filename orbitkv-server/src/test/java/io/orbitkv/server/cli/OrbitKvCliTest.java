package io.orbitkv.server.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.StateKeys;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** The {@code keys} and {@code boundary} commands through {@link OrbitKvCli#run}, with captured streams. */
class OrbitKvCliTest {

    static final String NS = "{\"model_id\":\"m\",\"revision\":\"r1\",\"weights_digest\":\"..\",\"tokenizer_digest\":\"..\","
            + "\"adapter_id\":\"\",\"dtype\":\"bf16\",\"kv_layout\":\"nhd\",\"page_tokens\":16,\"tp_size\":1,\"tp_rank\":0,"
            + "\"pp_size\":1,\"pp_rank\":0,\"format_version\":1}";
    static final String CONTRACT = "{\"page_tokens\":16,\"groups\":[{\"id\":0,\"kind\":\"full\"},"
            + "{\"id\":1,\"kind\":\"sliding_window\",\"window\":4096,\"sink\":4},{\"id\":2,\"kind\":\"recurrent\"}]}";
    static final String COVERAGE = "{\"0\":{\"pages\":[[0,40]]},\"1\":{\"pages\":[[30,64]]},\"2\":{\"checkpoints\":[256,512]}}";

    @TempDir
    Path dir;

    record Result(int code, String out, String err) {
    }

    static Result run(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        int code = OrbitKvCli.run(new PrintWriter(out), new PrintWriter(err), args);
        return new Result(code, out.toString(), err.toString());
    }

    Path write(String name, String content) throws Exception {
        Path p = dir.resolve(name);
        Files.writeString(p, content);
        return p;
    }

    @Test
    void versionPrintsTheBuildsVersionAndCommitFilledInByTheBuild() {
        Result r = run("--version");

        assertThat(r.code()).isZero();
        assertThat(r.out()).as("the build filled in version.properties (no ${...} left)").doesNotContain("${")
                .containsPattern("(?m)^orbitkv \\S+ \\(commit ([0-9a-f]{7,40}(-dirty)?|unknown)\\)$")
                .contains("Java " + Runtime.version());
        assertThat(Version.build().version()).isNotBlank().isNotEqualTo("unknown");
    }

    @Test
    void keysPrintsOneLinePerFullPage() throws Exception {
        Path ns = write("ns.json", NS);
        StringBuilder csv = new StringBuilder();
        int[] tokens = new int[40];
        for (int i = 0; i < 40; i++) {
            tokens[i] = i + 1;
            csv.append(i == 0 ? "" : ",").append(i + 1);
        }
        byte[] digest = StateJson.namespace(StateJson.parse(NS, "ns")).digest();
        List<StateKey> expected = StateKeys.forTokens(digest, 0, tokens, 16, new byte[0]);

        Result r = run("keys", "--namespace", ns.toString(), "--tokens", csv.toString());
        assertThat(r.code()).isZero();
        assertThat(r.err()).isEmpty();
        assertThat(r.out().lines()).containsExactly("0 " + expected.get(0).toHex(), "1 " + expected.get(1).toHex());

        Path file = write("tokens.txt", csv.toString().replace(",", ", ") + "\n");
        assertThat(run("keys", "--namespace", ns.toString(), "--tokens", file.toString()).out()).isEqualTo(r.out());

        List<StateKey> salted = StateKeys.forTokens(digest, 3, tokens, 16, new byte[] {0x0a, 0x0b});
        Result json = run("keys", "--namespace", ns.toString(), "--tokens", csv.toString(), "--group", "3", "--extra", "0a0b", "--json");
        assertThat(json.code()).isZero();
        JsonNode tree = StateJson.parse(json.out(), "out");
        assertThat(tree.get("namespace_digest").asText()).isEqualTo(new Namespace("m", "r1", "..", "..", "", "bf16", "nhd", 16, 1, 0, 1, 0, 1).digestHex());
        assertThat(tree.get("keys").get(1).get("key").asText()).isEqualTo(salted.get(1).toHex());
        assertThat(tree.get("keys")).hasSize(2);
    }

    @Test
    void boundaryJsonForTheSampleSelectsTheCheckpoint() throws Exception {
        Result r = run("boundary", "--contract", write("c.json", CONTRACT).toString(),
                "--coverage", write("cov.json", COVERAGE).toString(), "--prompt-tokens", "600", "--origin", "480", "--json");
        assertThat(r.code()).isZero();
        assertThat(r.err()).isEmpty();
        assertThat(r.out().strip()).isEqualTo("{\"boundary\":512,\"hit\":true,"
                + "\"required\":{\"0\":[[30,32]],\"1\":[[30,32]],\"2\":[[512,512]]},"
                + "\"rejected\":[{\"t\":592,\"group\":2,\"reason\":\"no checkpoint at token 592\"},"
                + "{\"t\":576,\"group\":2,\"reason\":\"no checkpoint at token 576\"},"
                + "{\"t\":560,\"group\":2,\"reason\":\"no checkpoint at token 560\"},"
                + "{\"t\":544,\"group\":2,\"reason\":\"no checkpoint at token 544\"},"
                + "{\"t\":528,\"group\":2,\"reason\":\"no checkpoint at token 528\"}]}");
    }

    @Test
    void boundaryTextForTheSampleFromZeroIsANoHitExplainedPerCandidate() throws Exception {
        Result r = run("boundary", "--contract", write("c.json", CONTRACT).toString(),
                "--coverage", write("cov.json", COVERAGE).toString(), "--prompt-tokens", "1000");
        assertThat(r.code()).isZero();
        List<String> lines = r.out().lines().toList();
        assertThat(lines.get(0)).isEqualTo("boundary 0 (no hit: compute from the origin)");
        assertThat(lines.get(1)).isEqualTo("rejected longer candidates: 62");
        assertThat(lines.get(2)).isEqualTo("  t=992 group 0: prefix page 40 not available");
        assertThat(lines).contains("  t=640 group 1: sink page 0 not available");
        assertThat(lines).hasSize(64);

        Result hit = run("boundary", "--contract", dir.resolve("c.json").toString(),
                "--coverage", dir.resolve("cov.json").toString(), "--prompt-tokens", "600", "--origin", "480");
        assertThat(hit.out().lines().limit(5)).containsExactly("boundary 512 (hit)", "required:",
                "  group 0 (full): pages [30, 32)", "  group 1 (sliding_window): pages [30, 32)",
                "  group 2 (recurrent): checkpoint at token 512");
    }

    @ParameterizedTest(name = "[{index}] {0}")
    @CsvSource(delimiter = '|', value = {
        "malformed contract JSON      | {\"page_tokens\":16,                                  | " + COVERAGE + " | 100 | 0  | malformed JSON",
        "trailing garbage             | " + CONTRACT + " x                                    | " + COVERAGE + " | 100 | 0  | malformed JSON",
        "unknown group kind           | {\"page_tokens\":16,\"groups\":[{\"id\":0,\"kind\":\"mamba\"}]} | {} | 100 | 0 | unknown group kind",
        "unknown contract field       | {\"page_tokens\":16,\"groups\":[{\"id\":0,\"kind\":\"full\"}],\"x\":1} | {} | 100 | 0 | unknown field",
        "missing window               | {\"page_tokens\":16,\"groups\":[{\"id\":0,\"kind\":\"sliding_window\"}]} | {} | 100 | 0 | missing field \"window\"",
        "negative page size           | {\"page_tokens\":-16,\"groups\":[{\"id\":0,\"kind\":\"full\"}]} | {} | 100 | 0 | page_tokens",
        "fractional page size         | {\"page_tokens\":16.5,\"groups\":[{\"id\":0,\"kind\":\"full\"}]} | {} | 100 | 0 | must be an integer",
        "duplicate group              | {\"page_tokens\":16,\"groups\":[{\"id\":0,\"kind\":\"full\"},{\"id\":0,\"kind\":\"recurrent\"}]} | {} | 100 | 0 | duplicate group id",
        "empty groups                 | {\"page_tokens\":16,\"groups\":[]}                     | {} | 100 | 0 | non-empty",
        "coverage of unknown group    | " + CONTRACT + " | {\"9\":{\"pages\":[[0,1]]}}                   | 100 | 0  | group 9",
        "pages for a recurrent group  | " + CONTRACT + " | {\"2\":{\"pages\":[[0,1]]}}                   | 100 | 0  | recurrent",
        "misaligned checkpoint        | " + CONTRACT + " | {\"2\":{\"checkpoints\":[100]}}              | 100 | 0  | not a multiple",
        "negative page range          | " + CONTRACT + " | {\"0\":{\"pages\":[[-1,4]]}}                 | 100 | 0  | 0 <= start < end",
        "empty page range             | " + CONTRACT + " | {\"0\":{\"pages\":[[4,4]]}}                  | 100 | 0  | 0 <= start < end",
        "unknown coverage field       | " + CONTRACT + " | {\"0\":{\"ranges\":[[0,4]]}}                 | 100 | 0  | exactly one field",
        "empty prompt                 | " + CONTRACT + " | " + COVERAGE + "                              | 0   | 0  | empty prompt",
        "negative origin              | " + CONTRACT + " | " + COVERAGE + "                              | 100 | -16 | --origin",
        "misaligned origin            | " + CONTRACT + " | " + COVERAGE + "                              | 100 | 8  | --origin",
        "too many candidates          | " + CONTRACT + " | " + COVERAGE + "                              | 1000000000000 | 0 | candidate boundaries",
        "prompt beyond long range     | " + CONTRACT + " | " + COVERAGE + "                              | 99999999999999999999 | 0 | --prompt-tokens",
    })
    void badBoundaryInputIsOneLineAndExitTwo(String name, String contract, String coverage, String prompt,
                                             String origin, String expected) throws Exception {
        Result r = run("boundary", "--contract", write("c.json", contract).toString(),
                "--coverage", write("cov.json", coverage).toString(), "--prompt-tokens", prompt, "--origin", origin);
        assertOneLineError(r, expected);
    }

    @ParameterizedTest(name = "[{index}] {0}")
    @CsvSource(delimiter = '|', value = {
        "missing field     | {\"model_id\":\"m\"}                 | 1,2,3 |      | missing field",
        "empty model id    | " + "{\"model_id\":\"\",\"revision\":\"r1\",\"weights_digest\":\"..\",\"tokenizer_digest\":\"..\",\"adapter_id\":\"\",\"dtype\":\"bf16\",\"kv_layout\":\"nhd\",\"page_tokens\":16,\"tp_size\":1,\"tp_rank\":0,\"pp_size\":1,\"pp_rank\":0,\"format_version\":1} | 1,2 | | model_id",
        "rank out of range | " + "{\"model_id\":\"m\",\"revision\":\"r1\",\"weights_digest\":\"..\",\"tokenizer_digest\":\"..\",\"adapter_id\":\"\",\"dtype\":\"bf16\",\"kv_layout\":\"nhd\",\"page_tokens\":16,\"tp_size\":1,\"tp_rank\":1,\"pp_size\":1,\"pp_rank\":0,\"format_version\":1} | 1,2 | | tp_rank",
        "string page size  | " + "{\"model_id\":\"m\",\"revision\":\"r1\",\"weights_digest\":\"..\",\"tokenizer_digest\":\"..\",\"adapter_id\":\"\",\"dtype\":\"bf16\",\"kv_layout\":\"nhd\",\"page_tokens\":\"16\",\"tp_size\":1,\"tp_rank\":0,\"pp_size\":1,\"pp_rank\":0,\"format_version\":1} | 1,2 | | must be an integer",
        "not an object     | [1,2]                                   | 1,2   |      | JSON object",
        "bad token         | " + NS + " | 1,x,3   |      | not an integer",
        "negative token    | " + NS + " | 1,-3    |      | negative",
        "bad extra hex     | " + NS + " | 1,2     | zz   | --extra",
        "odd extra hex     | " + NS + " | 1,2     | abc  | --extra",
    })
    void badKeysInputIsOneLineAndExitTwo(String name, String ns, String tokens, String extra, String expected) throws Exception {
        Path nsFile = write("ns.json", ns);
        Result r = extra == null
                ? run("keys", "--namespace", nsFile.toString(), "--tokens", tokens)
                : run("keys", "--namespace", nsFile.toString(), "--tokens", tokens, "--extra", extra);
        assertOneLineError(r, expected);
    }

    @Test
    void emptyTokensMissingFilesAndBadOptionsAreOneLineErrors() throws Exception {
        Path ns = write("ns.json", NS);
        assertOneLineError(run("keys", "--namespace", ns.toString(), "--tokens", ""), "empty prompt");
        assertOneLineError(run("keys", "--namespace", ns.toString(), "--tokens", write("empty.txt", "\n").toString()), "empty prompt");
        assertOneLineError(run("keys", "--namespace", dir.resolve("absent.json").toString(), "--tokens", "1"), "no such file");
        assertOneLineError(run("keys", "--namespace", ns.toString(), "--tokens", "1", "--group", "-1"), "--group");
        assertOneLineError(run("boundary", "--contract", "c.json", "--coverage", "cov.json"), "--prompt-tokens");
        assertOneLineError(run("boundary", "--contract", "c", "--coverage", "d", "--prompt-tokens", "abc"), "--prompt-tokens");
        assertOneLineError(run("nonsense"), "nonsense");
    }

    private static void assertOneLineError(Result r, String expectedPart) {
        assertThat(r.code()).as("exit code; stderr=%s", r.err()).isEqualTo(2);
        assertThat(r.out()).isEmpty();
        assertThat(r.err().lines()).hasSize(1);
        assertThat(r.err()).startsWith("orbitkv: error: ").contains(expectedPart).doesNotContain("\tat ");
    }

    @Test
    void routerRefusesAManagerEndpointWithoutClusterCredentialsAndHalfATlsSet() throws Exception {
        String worker = "name=w,topic=t,events=tcp://127.0.0.1:9,manager=127.0.0.1:7400";
        assertOneLineError(run("router", "--worker", worker, "--listen", "127.0.0.1:0"), "--cluster-token-file");

        Path token = io.orbitkv.testkit.ManagerProcess.writeClusterToken(dir.resolve("token"));
        assertOneLineError(run("router", "--worker", worker, "--listen", "127.0.0.1:0", "--cluster-token-file",
                token.toString(), "--tls-cert", token.toString()), "--tls-cert, --tls-key and --tls-ca go together");

        assertOneLineError(run("router", "--worker", worker.replace("127.0.0.1:7400", "tcp://h:1"), "--listen", "127.0.0.1:0"),
                "manager= must be HOST:PORT");
    }
}
