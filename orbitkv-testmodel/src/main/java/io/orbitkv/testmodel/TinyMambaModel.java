package io.orbitkv.testmodel;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.HexFormat;

/**
 * A generated Mamba-1 model on disk: {@code dir/model.gguf} (GGUF v3, F32, llama.cpp's Mamba
 * names, the {@link ByteFallbackVocab} as an SPM vocabulary). llama.cpp only: Jlama has no Mamba.
 *
 * <p>Immutable value returned by {@link #generate}. Invariant: writing the same spec twice gives
 * a byte-identical file; {@code weightsDigestHex} is {@link TinyMambaWeights#digestHex()} and
 * {@code tokenizerDigestHex} is the SHA-256 of the vocabulary's GGUF pieces (each UTF-8, then a
 * 0 byte), the two digests an engine puts in its OrbitKV namespace.
 *
 * @param dir                the model directory
 * @param spec               the spec it was generated from
 * @param weightsDigestHex   SHA-256 of the weights, hex
 * @param tokenizerDigestHex SHA-256 of the vocabulary, hex
 */
public record TinyMambaModel(Path dir, TinyMambaSpec spec, String weightsDigestHex, String tokenizerDigestHex) {

    public static final String GGUF = "model.gguf";

    /** Writes {@code spec}'s GGUF file into {@code dir} (created if missing). */
    public static TinyMambaModel generate(TinyMambaSpec spec, Path dir) throws IOException {
        Files.createDirectories(dir);
        TinyMambaWeights weights = new TinyMambaWeights(spec);
        GgufWriter.write(GgufWriter.mambaMetadata(spec), weights.tensors(), weights::values, dir.resolve(GGUF));
        MessageDigest sha = TinyLlamaWeights.sha256();
        for (ByteFallbackVocab.Token t : ByteFallbackVocab.tokens(spec.vocab())) {
            sha.update(t.ggufPiece().getBytes(StandardCharsets.UTF_8));
            sha.update((byte) 0);
        }
        return new TinyMambaModel(dir, spec, weights.digestHex(), HexFormat.of().formatHex(sha.digest()));
    }

    /** Path of the GGUF file, for llama.cpp. */
    public Path ggufFile() {
        return dir.resolve(GGUF);
    }

    /** {@code TinyMambaModel OUT_DIR [ci|bench] [SEED]}: writes a model and prints its digests. */
    public static void main(String[] args) throws IOException {
        if (args.length < 1) {
            System.err.println("usage: TinyMambaModel OUT_DIR [ci|bench] [SEED]");
            System.exit(2);
        }
        TinyMambaSpec spec = args.length > 1 && args[1].equals("bench") ? TinyMambaSpec.bench() : TinyMambaSpec.ci();
        if (args.length > 2) spec = spec.withSeed(Long.parseLong(args[2]));
        TinyMambaModel m = generate(spec, Path.of(args[0]));
        System.out.println("wrote " + m.ggufFile() + " (" + spec + ")");
        System.out.println("weights sha256   " + m.weightsDigestHex());
        System.out.println("tokenizer sha256 " + m.tokenizerDigestHex());
    }
}
