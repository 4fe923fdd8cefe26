package io.orbitkv.server.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.orbitkv.state.Coverage;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.StateKeys;
import io.orbitkv.state.TokenChain;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;

/**
 * The shared state test vectors ({@code docs/vectors/state-vectors.json}): the inputs are chosen
 * here, the outputs are computed by the Java implementation. Java ({@code StateVectorsTest}) and
 * Python ({@code clients/python/tests/test_state.py}) both recompute the outputs from the file's
 * inputs, and the doc embeds the file.
 *
 * <p>Regenerate (only when a derivation deliberately changes) from the repository root:
 * <pre>
 *   ./mvnw -B -o -pl orbitkv-server -am test-compile -q
 *   java -cp "orbitkv-server/target/test-classes:orbitkv-server/target/classes:$(...classpath...)" \
 *       io.orbitkv.server.cli.StateVectors docs/vectors/state-vectors.json
 * </pre>
 * ({@code StateVectorsTest} prints the exact command when the file and the code disagree.)
 */
public final class StateVectors {

    private static final JsonNodeFactory F = JsonNodeFactory.instance;
    private static final HexFormat HEX = HexFormat.of();

    private StateVectors() {
    }

    public static void main(String[] args) throws Exception {
        Path out = Path.of(args.length > 0 ? args[0] : "docs/vectors/state-vectors.json");
        String text = StateJson.MAPPER.writerWithDefaultPrettyPrinter().writeValueAsString(complete(inputs())) + "\n";
        Files.writeString(out, text, StandardCharsets.UTF_8);
        System.out.println("wrote " + out);
    }

    /** The vectors' inputs, outputs left out. */
    static ObjectNode inputs() {
        ObjectNode root = F.objectNode();
        root.put("description", "OrbitKV state contract test vectors; see docs/state-contract.md");
        ArrayNode ns = root.putArray("namespaces");
        ns.addObject().put("name", "sample").set("fields", namespaceFields("m", "r1", "..", "..", "", "bf16", "nhd", 16, 1, 0, 1, 0, 1));
        ns.addObject().put("name", "llama-tp2").set("fields", namespaceFields("meta-llama/Llama-3.1-8B-Instruct",
                "0e9e39f249a16976918f6564b8830bc894c89659", "sha256:5f0b02c75b57c5855da9ae460ce51323ea669d8a",
                "sha256:79e3e522635f3171300913bb421464a87de6222182a0570b9b2ccba2a964b2b4", "", "bf16", "nhd",
                16, 2, 1, 1, 0, 1));
        ns.addObject().put("name", "lora-unicode").set("fields", namespaceFields("qwen/Qwen3-ü", "main", "w-α",
                "t-β", "lora-模型", "fp8_e4m3", "hnd", 64, 4, 3, 2, 1, 2));

        ArrayNode bh = root.putArray("block_hash_keys");
        bh.addObject().put("namespace", "sample").put("group", 0).put("block_hash_int", 0x0102030405060708L);
        bh.addObject().put("namespace", "llama-tp2").put("group", 2).put("block_hash_int", -1L);
        bh.addObject().put("namespace", "sample").put("group", 1)
                .put("block_hash_hex", HEX.formatHex(sha256("orbitkv block".getBytes(StandardCharsets.US_ASCII))));

        ArrayNode tc = root.putArray("token_chains");
        tc.addObject().put("namespace", "sample").put("group", 0).put("page_tokens", 16).put("extra_hex", "")
                .set("tokens", ints(range(1, 41)));
        tc.addObject().put("namespace", "sample").put("group", 1).put("page_tokens", 16).put("extra_hex", "0a0b")
                .set("tokens", ints(range(1, 41)));
        int[] pseudo = new int[50];
        for (int i = 0; i < pseudo.length; i++) pseudo[i] = (int) ((i * 2654435761L) % 128256);
        tc.addObject().put("namespace", "llama-tp2").put("group", 0).put("page_tokens", 16).put("extra_hex", "")
                .set("tokens", ints(pseudo));

        ArrayNode b = root.putArray("boundaries");
        String sampleContract = "{\"page_tokens\":16,\"groups\":[{\"id\":0,\"kind\":\"full\"},"
                + "{\"id\":1,\"kind\":\"sliding_window\",\"window\":4096,\"sink\":4},{\"id\":2,\"kind\":\"recurrent\"}]}";
        String sampleCoverage = "{\"0\":{\"pages\":[[0,40]]},\"1\":{\"pages\":[[30,64]]},\"2\":{\"checkpoints\":[256,512]}}";
        boundary(b, "sample, origin above the sink: the recurrent checkpoint decides", sampleContract, sampleCoverage, 600, 480);
        boundary(b, "sample from origin 0: sink page 0 is missing, no hit", sampleContract, sampleCoverage, 100, 0);
        boundary(b, "sliding window with sinks across a gap", "{\"page_tokens\":4,\"groups\":[{\"id\":0,\"kind\":\"sliding_window\",\"window\":10,\"sink\":3}]}",
                "{\"0\":{\"pages\":[[0,1],[5,9]]}}", 45, 0);
        boundary(b, "full + recurrent from an origin; the cap keeps one token", "{\"page_tokens\":16,\"groups\":[{\"id\":0,\"kind\":\"full\"},{\"id\":5,\"kind\":\"recurrent\"}]}",
                "{\"0\":{\"pages\":[[0,10]]},\"5\":{\"checkpoints\":[64,128,144]}}", 200, 32);
        boundary(b, "prompt of exactly one page: the cap is 0, nothing to select", "{\"page_tokens\":16,\"groups\":[{\"id\":0,\"kind\":\"full\"}]}",
                "{\"0\":{\"pages\":[[0,4]]}}", 16, 0);
        return root;
    }

    /** The vectors with every output computed from the inputs of {@code vectors}. */
    static ObjectNode complete(JsonNode vectors) {
        ObjectNode root = vectors.deepCopy();
        Map<String, Namespace> byName = new HashMap<>();
        for (JsonNode n : root.get("namespaces")) {
            ObjectNode o = (ObjectNode) n;
            Namespace ns = StateJson.namespace(o.get("fields"));
            byName.put(o.get("name").asText(), ns);
            o.put("canonical_hex", HEX.formatHex(ns.canonicalBytes()));
            o.put("digest", ns.digestHex());
        }
        for (JsonNode n : root.get("block_hash_keys")) {
            ObjectNode o = (ObjectNode) n;
            byte[] digest = byName.get(o.get("namespace").asText()).digest();
            int group = o.get("group").asInt();
            StateKey key;
            if (o.has("block_hash_int")) {
                key = StateKeys.forBlockHash(digest, group, o.get("block_hash_int").asLong());
                byte[] le = java.nio.ByteBuffer.allocate(8).order(java.nio.ByteOrder.LITTLE_ENDIAN)
                        .putLong(o.get("block_hash_int").asLong()).array();
                o.put("block_hash_hex", HEX.formatHex(le));
            } else {
                key = StateKeys.forBlockHash(digest, group, HEX.parseHex(o.get("block_hash_hex").asText()));
            }
            o.put("key", key.toHex());
        }
        for (JsonNode n : root.get("token_chains")) {
            ObjectNode o = (ObjectNode) n;
            byte[] digest = byName.get(o.get("namespace").asText()).digest();
            int[] tokens = new int[o.get("tokens").size()];
            for (int i = 0; i < tokens.length; i++) tokens[i] = o.get("tokens").get(i).asInt();
            byte[] extra = HEX.parseHex(o.get("extra_hex").asText());
            int p = o.get("page_tokens").asInt();
            o.put("root", HEX.formatHex(TokenChain.root(digest)));
            ArrayNode hashes = o.putArray("page_hashes");
            for (byte[] h : TokenChain.pageHashes(digest, tokens, p, extra)) hashes.add(HEX.formatHex(h));
            ArrayNode keys = o.putArray("keys");
            for (StateKey k : StateKeys.forTokens(digest, o.get("group").asInt(), tokens, p, extra)) keys.add(k.toHex());
        }
        for (JsonNode n : root.get("boundaries")) {
            ObjectNode o = (ObjectNode) n;
            RecoveryContract c = StateJson.contract(o.get("contract"));
            Coverage cov = StateJson.coverage(o.get("coverage"), c);
            o.set("result", StateJson.selection(c.select(cov, o.get("prompt_tokens").asLong(),
                    o.get("origin").asLong(), Integer.MAX_VALUE)));
        }
        return root;
    }

    private static void boundary(ArrayNode out, String name, String contract, String coverage, long prompt, long origin) {
        ObjectNode o = out.addObject();
        o.put("name", name);
        o.set("contract", StateJson.parse(contract, name));
        o.set("coverage", StateJson.parse(coverage, name));
        o.put("prompt_tokens", prompt);
        o.put("origin", origin);
    }

    private static ObjectNode namespaceFields(String modelId, String revision, String weights, String tokenizer,
                                              String adapter, String dtype, String layout, int pageTokens,
                                              int tpSize, int tpRank, int ppSize, int ppRank, int format) {
        ObjectNode o = F.objectNode();
        o.put("model_id", modelId).put("revision", revision).put("weights_digest", weights)
                .put("tokenizer_digest", tokenizer).put("adapter_id", adapter).put("dtype", dtype)
                .put("kv_layout", layout).put("page_tokens", pageTokens).put("tp_size", tpSize)
                .put("tp_rank", tpRank).put("pp_size", ppSize).put("pp_rank", ppRank).put("format_version", format);
        return o;
    }

    private static int[] range(int from, int to) {
        int[] out = new int[to - from];
        for (int i = 0; i < out.length; i++) out[i] = from + i;
        return out;
    }

    private static ArrayNode ints(int[] values) {
        ArrayNode a = F.arrayNode();
        for (int v : values) a.add(v);
        return a;
    }

    private static byte[] sha256(byte[] in) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(in);
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    static List<String> sections() {
        return List.of("namespaces", "block_hash_keys", "token_chains", "boundaries");
    }
}
