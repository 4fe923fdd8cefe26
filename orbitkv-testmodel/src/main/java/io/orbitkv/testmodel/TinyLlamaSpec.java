package io.orbitkv.testmodel;

/**
 * The shape and seed of one generated Llama model: everything that decides its bytes.
 *
 * <p>Immutable value. Invariants (compact constructor): all sizes positive;
 * {@code hidden % heads == 0}; {@code heads % kvHeads == 0} (grouped-query attention);
 * the head size is even (RoPE rotates pairs); the vocabulary holds the 3 special tokens and the
 * 256 byte tokens of {@link ByteFallbackVocab}.
 *
 * <p>Design note: two presets, not a free-for-all. {@link #ci()} is the model every parity test
 * runs: 2 layers, hidden 64, 4 query / 2 KV heads (GQA, so the KV page carries half the query
 * width), about 0.13 M parameters (0.5 MB of F32), a greedy step in well under a millisecond even
 * with the Vector API forced onto its scalar fallback. {@link #bench()} is big enough that
 * prefill dominates a restore: 8 layers, hidden 512, context 4096, about 23.7 M parameters
 * (95 MB of F32, written in about 2 s), one 16-token KV page is 8 layers x 2 x 16 x 256 floats = 256 KiB.
 *
 * @param name         model name written into config/GGUF metadata
 * @param layers       transformer blocks
 * @param hidden       embedding width
 * @param heads        query heads
 * @param kvHeads      key/value heads ({@code heads} for plain multi-head attention)
 * @param intermediate feed-forward width
 * @param vocab        vocabulary size
 * @param context      maximum positions
 * @param seed         weight seed: same seed, same bytes
 */
public record TinyLlamaSpec(String name, int layers, int hidden, int heads, int kvHeads,
                            int intermediate, int vocab, int context, long seed) {

    /** RoPE base frequency written to both formats. */
    public static final float ROPE_THETA = 10_000f;
    /** RMSNorm epsilon written to both formats. */
    public static final float RMS_NORM_EPS = 1e-5f;

    public TinyLlamaSpec {
        if (name == null || name.isBlank()) throw new IllegalArgumentException("name must not be blank");
        requirePositive("layers", layers);
        requirePositive("hidden", hidden);
        requirePositive("heads", heads);
        requirePositive("kvHeads", kvHeads);
        requirePositive("intermediate", intermediate);
        requirePositive("context", context);
        if (hidden % heads != 0) throw new IllegalArgumentException("hidden " + hidden + " not divisible by heads " + heads);
        if (heads % kvHeads != 0) throw new IllegalArgumentException("heads " + heads + " not divisible by kvHeads " + kvHeads);
        if ((hidden / heads) % 2 != 0) throw new IllegalArgumentException("head size must be even: " + hidden / heads);
        if (vocab < ByteFallbackVocab.MIN_VOCAB) {
            throw new IllegalArgumentException("vocab must be >= " + ByteFallbackVocab.MIN_VOCAB + ": " + vocab);
        }
    }

    /** The CI model: 2 layers, hidden 64, 4 q / 2 kv heads, FFN 128, vocab 320, context 256. */
    public static TinyLlamaSpec ci() {
        return new TinyLlamaSpec("orbitkv-tiny-llama-ci", 2, 64, 4, 2, 128, 320, 256, 20_261_129L);
    }

    /** The benchmark model: 8 layers, hidden 512, 8 q / 4 kv heads, FFN 1376, vocab 512, context 4096. */
    public static TinyLlamaSpec bench() {
        return new TinyLlamaSpec("orbitkv-small-llama-bench", 8, 512, 8, 4, 1376, 512, 4096, 4_096L);
    }

    /** The same shape with another seed: other weights, hence another namespace. */
    public TinyLlamaSpec withSeed(long otherSeed) {
        return new TinyLlamaSpec(name, layers, hidden, heads, kvHeads, intermediate, vocab, context, otherSeed);
    }

    /** Width of one attention head. */
    public int headSize() {
        return hidden / heads;
    }

    /** Width of one position's K (or V) vector in one layer: {@code kvHeads * headSize}. */
    public int kvWidth() {
        return kvHeads * headSize();
    }

    private static void requirePositive(String field, int value) {
        if (value <= 0) throw new IllegalArgumentException(field + " must be > 0: " + value);
    }
}
