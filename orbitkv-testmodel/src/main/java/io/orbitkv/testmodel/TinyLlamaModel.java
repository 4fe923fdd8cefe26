package io.orbitkv.testmodel;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.List;

/**
 * A generated model on disk: one directory holding the same seeded weights in two formats.
 *
 * <pre>
 *   dir/config.json            HF LlamaConfig keys (Jlama reads it to pick the Llama model class)
 *   dir/model.safetensors      F32 weights, HF names            ({@link SafetensorsWriter})
 *   dir/tokenizer.json         byte-fallback BPE, no merges     ({@link ByteFallbackVocab})
 *   dir/tokenizer_config.json  special tokens and tokenizer class
 *   dir/model.gguf             GGUF v3, F32, llama.cpp names    ({@link GgufWriter})
 * </pre>
 *
 * <p>Immutable value returned by {@link #generate}. Invariant: writing the same spec twice gives
 * byte-identical files; {@code weightsDigestHex} is {@link TinyLlamaWeights#digestHex()} and
 * {@code tokenizerDigestHex} is the SHA-256 of {@code tokenizer.json}'s bytes, the two digests an
 * engine puts in its OrbitKV namespace.
 *
 * @param dir                the model directory
 * @param spec               the spec it was generated from
 * @param weightsDigestHex   SHA-256 of the weights, hex
 * @param tokenizerDigestHex SHA-256 of {@code tokenizer.json}, hex
 */
public record TinyLlamaModel(Path dir, TinyLlamaSpec spec, String weightsDigestHex, String tokenizerDigestHex) {

    public static final String CONFIG = "config.json";
    public static final String SAFETENSORS = "model.safetensors";
    public static final String TOKENIZER = "tokenizer.json";
    public static final String TOKENIZER_CONFIG = "tokenizer_config.json";
    public static final String GGUF = "model.gguf";

    /** Writes every file of {@code spec} into {@code dir} (created if missing). */
    public static TinyLlamaModel generate(TinyLlamaSpec spec, Path dir) throws IOException {
        Files.createDirectories(dir);
        TinyLlamaWeights weights = new TinyLlamaWeights(spec);
        Files.writeString(dir.resolve(CONFIG), configJson(spec), StandardCharsets.UTF_8);
        byte[] tokenizer = tokenizerJson(spec).getBytes(StandardCharsets.UTF_8);
        Files.write(dir.resolve(TOKENIZER), tokenizer);
        Files.writeString(dir.resolve(TOKENIZER_CONFIG), tokenizerConfigJson(spec), StandardCharsets.UTF_8);
        SafetensorsWriter.write(weights, dir.resolve(SAFETENSORS));
        GgufWriter.write(weights, dir.resolve(GGUF));
        String tokenizerDigest = HexFormat.of().formatHex(TinyLlamaWeights.sha256().digest(tokenizer));
        return new TinyLlamaModel(dir, spec, weights.digestHex(), tokenizerDigest);
    }

    /** Path of the GGUF file, for llama.cpp. */
    public Path ggufFile() {
        return dir.resolve(GGUF);
    }

    static String configJson(TinyLlamaSpec s) {
        return "{\n"
                + " \"architectures\": [\"LlamaForCausalLM\"],\n"
                + " \"model_type\": \"llama\",\n"
                + " \"hidden_size\": " + s.hidden() + ",\n"
                + " \"intermediate_size\": " + s.intermediate() + ",\n"
                + " \"num_attention_heads\": " + s.heads() + ",\n"
                + " \"num_key_value_heads\": " + s.kvHeads() + ",\n"
                + " \"num_hidden_layers\": " + s.layers() + ",\n"
                + " \"vocab_size\": " + s.vocab() + ",\n"
                + " \"max_position_embeddings\": " + s.context() + ",\n"
                + " \"rms_norm_eps\": " + TinyLlamaSpec.RMS_NORM_EPS + ",\n"
                + " \"rope_theta\": " + TinyLlamaSpec.ROPE_THETA + ",\n"
                + " \"bos_token_id\": " + ByteFallbackVocab.BOS + ",\n"
                + " \"eos_token_id\": " + ByteFallbackVocab.EOS + ",\n"
                + " \"hidden_act\": \"silu\",\n"
                + " \"tie_word_embeddings\": false,\n"
                + " \"torch_dtype\": \"float32\"\n"
                + "}\n";
    }

    static String tokenizerJson(TinyLlamaSpec s) {
        List<ByteFallbackVocab.Token> tokens = ByteFallbackVocab.tokens(s.vocab());
        StringBuilder out = new StringBuilder(32 * tokens.size());
        out.append("{\n \"version\": \"1.0\",\n \"added_tokens\": [");
        for (int id = 0; id < ByteFallbackVocab.FIRST_BYTE; id++) {
            out.append(id == 0 ? "\n" : ",\n").append("  {\"id\": ").append(id).append(", \"content\": ")
                    .append(JsonText.quote(tokens.get(id).hfPiece()))
                    .append(", \"single_word\": false, \"lstrip\": false, \"rstrip\": false,"
                            + " \"normalized\": false, \"special\": true}");
        }
        out.append("\n ],\n \"normalizer\": null,\n \"pre_tokenizer\": null,\n \"post_processor\": null,\n"
                + " \"decoder\": null,\n \"model\": {\n  \"type\": \"BPE\",\n  \"dropout\": null,\n"
                + "  \"unk_token\": \"<unk>\",\n  \"continuing_subword_prefix\": null,\n"
                + "  \"end_of_word_suffix\": null,\n  \"fuse_unk\": true,\n  \"byte_fallback\": true,\n"
                + "  \"vocab\": {");
        for (ByteFallbackVocab.Token t : tokens) {
            out.append(t.id() == 0 ? "\n" : ",\n").append("   ").append(JsonText.quote(t.hfPiece()))
                    .append(": ").append(t.id());
        }
        out.append("\n  },\n  \"merges\": []\n }\n}\n");
        return out.toString();
    }

    static String tokenizerConfigJson(TinyLlamaSpec s) {
        return "{\n \"bos_token\": \"<s>\",\n \"eos_token\": \"</s>\",\n \"unk_token\": \"<unk>\",\n"
                + " \"legacy\": false,\n \"model_max_length\": " + s.context() + ",\n"
                + " \"tokenizer_class\": \"LlamaTokenizer\"\n}\n";
    }

    /**
     * {@code TinyLlamaModel OUT_DIR [ci|bench] [SEED]}: writes a model and prints its digests.
     */
    public static void main(String[] args) throws IOException {
        if (args.length < 1) {
            System.err.println("usage: TinyLlamaModel OUT_DIR [ci|bench] [SEED]");
            System.exit(2);
        }
        TinyLlamaSpec spec = args.length > 1 && args[1].equals("bench") ? TinyLlamaSpec.bench() : TinyLlamaSpec.ci();
        if (args.length > 2) spec = spec.withSeed(Long.parseLong(args[2]));
        TinyLlamaModel m = generate(spec, Path.of(args[0]));
        System.out.println("wrote " + m.dir() + " (" + spec + ")");
        System.out.println("weights sha256   " + m.weightsDigestHex());
        System.out.println("tokenizer sha256 " + m.tokenizerDigestHex());
    }
}
