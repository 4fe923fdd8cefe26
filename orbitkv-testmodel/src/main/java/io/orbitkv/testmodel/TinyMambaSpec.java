package io.orbitkv.testmodel;

/**
 * The shape and seed of one generated Mamba-1 model: everything that decides its bytes.
 *
 * <p>Immutable value. Invariants (compact constructor): all sizes positive; the convolution
 * kernel is at least 2 (a kernel of 1 keeps no convolution state); the vocabulary holds the 3
 * special tokens and the 256 byte tokens of {@link ByteFallbackVocab}.
 *
 * <p>Design note: Mamba-1 ({@code general.architecture = "mamba"}) because it is the recurrent
 * architecture the bundled llama.cpp build (b4916) runs with the simplest state: per layer one
 * convolution window of {@code (convKernel - 1) x inner} floats and one SSM state of
 * {@code stateSize x inner} floats, both replaced (not appended to) by every token. That build
 * also knows RWKV-6 (a recurrent state too, but with a token-shift plus a wkv state per head and
 * many more tensors), and no Mamba-2, Jamba or other hybrid, so the model is purely recurrent: no
 * attention layer, no KV page, one recurrent state group. Two presets: {@link #ci()} (2 layers,
 * width 64, inner 128, about 60 k parameters; a checkpoint is 2 x (3 x 128 + 16 x 128) floats
 * = 19 KiB) and {@link #bench()} (8 layers, width 256, inner 512, about 2.5 M parameters; a
 * checkpoint is 311,508 bytes (304 KiB), so checkpoint bytes are what the cadence table weighs).
 *
 * @param name         model name written into the GGUF metadata
 * @param layers       Mamba blocks
 * @param hidden       embedding width ({@code d_model})
 * @param inner        expanded width ({@code d_inner}, usually 2 x hidden)
 * @param stateSize    SSM state per inner channel ({@code d_state})
 * @param convKernel   causal convolution width ({@code d_conv})
 * @param timeStepRank rank of the step projection ({@code dt_rank}, usually ceil(hidden / 16))
 * @param vocab        vocabulary size
 * @param context      maximum positions written to the metadata
 * @param seed         weight seed: same seed, same bytes
 */
public record TinyMambaSpec(String name, int layers, int hidden, int inner, int stateSize, int convKernel,
                            int timeStepRank, int vocab, int context, long seed) {

    public TinyMambaSpec {
        if (name == null || name.isBlank()) throw new IllegalArgumentException("name must not be blank");
        requirePositive("layers", layers);
        requirePositive("hidden", hidden);
        requirePositive("inner", inner);
        requirePositive("stateSize", stateSize);
        requirePositive("timeStepRank", timeStepRank);
        requirePositive("context", context);
        if (convKernel < 2) throw new IllegalArgumentException("convKernel must be >= 2: " + convKernel);
        if (vocab < ByteFallbackVocab.MIN_VOCAB) {
            throw new IllegalArgumentException("vocab must be >= " + ByteFallbackVocab.MIN_VOCAB + ": " + vocab);
        }
    }

    /** The CI model: 2 layers, hidden 64, inner 128, state 16, kernel 4, dt rank 4, vocab 320, context 256. */
    public static TinyMambaSpec ci() {
        return new TinyMambaSpec("orbitkv-tiny-mamba-ci", 2, 64, 128, 16, 4, 4, 320, 256, 20_261_201L);
    }

    /** The benchmark model: 8 layers, hidden 256, inner 512, state 16, kernel 4, dt rank 16, vocab 512, context 4096. */
    public static TinyMambaSpec bench() {
        return new TinyMambaSpec("orbitkv-small-mamba-bench", 8, 256, 512, 16, 4, 16, 512, 4096, 4_097L);
    }

    /** The same shape with another seed: other weights, hence another namespace. */
    public TinyMambaSpec withSeed(long otherSeed) {
        return new TinyMambaSpec(name, layers, hidden, inner, stateSize, convKernel, timeStepRank, vocab, context, otherSeed);
    }

    /** Floats of one layer's recurrent state: the convolution window plus the SSM state. */
    public long stateFloatsPerLayer() {
        return (long) (convKernel - 1) * inner + (long) stateSize * inner;
    }

    private static void requirePositive(String field, int value) {
        if (value <= 0) throw new IllegalArgumentException(field + " must be > 0: " + value);
    }
}
