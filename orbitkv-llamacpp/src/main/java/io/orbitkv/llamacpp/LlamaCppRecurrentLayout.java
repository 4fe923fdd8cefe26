package io.orbitkv.llamacpp;

import java.lang.foreign.MemorySegment;
import java.util.Optional;

import static java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED;
import static java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED;

/**
 * The llama.cpp recurrent checkpoint image ({@code kv_layout = "llamacpp-recurrent-v1@b4916"}):
 * the whole {@code llama_state_seq_get_data} blob of a recurrent (Mamba) sequence after its
 * prefill reached token {@code t}, byte for byte.
 *
 * <p><b>The recurrent sequence state of b4916.</b> A recurrent model's cache has one cell per
 * sequence, and that cell's "K" row is the layer's convolution window ({@code (d_conv - 1) x
 * d_inner} floats), its "V" row the SSM state ({@code d_state x d_inner} floats); each token
 * replaces both, and the cell's position is the last token's. Measured on the CI model: an empty
 * sequence's blob is 60 bytes (no cells), a prefilled one 19,524 bytes. All little-endian:
 * <pre>
 *    0  u32 cell_count = 1
 *    4  i32 pos = t - 1               the last token folded into the state
 *    8  u32 n_seq_id = 0              (a single-sequence blob lists no ids)
 *   12  u32 v_trans = 0
 *   16  u32 n_layer = L
 *   20  L x ( i32 k_type | u64 k_row_bytes | k_row )      convolution windows
 *       L x ( i32 v_type | u64 v_row_bytes | v_row )      SSM states
 *   CI model (L = 2, d_inner 128, d_state 16, d_conv 4, F32): 2 x (12 + 1,536) + 2 x (12 + 8,192) + 20 = 19,524 bytes
 * </pre>
 *
 * <p>Publication rule: the runner exports the blob right after the prefill chunk that ends at
 * {@code t} and checks it ({@link #check}) before publishing it as the checkpoint named by the
 * token-chain key of {@code [0, t)}; a restore checks the leased image again (size, every header
 * word, {@code pos = t - 1}) before {@code llama_state_seq_set_data}, so an image of another
 * geometry or another boundary is refused rather than restored. Immutable and thread-safe.
 *
 * <p>Design note: the image is the blob verbatim rather than the two state tensors alone: the
 * header is 20 + 24 L bytes (68 of 19,524 on the CI model), and keeping it means a restore is one
 * {@code set_data} of the leased bytes with no assembly, and the checks above read the engine's
 * own description of the bytes. Checkpoints are F32 whatever {@code type_k}: this build keeps
 * recurrent state in F32 (measured: both types read 0).
 *
 * @param layers    {@code n_layer}
 * @param kType     {@code ggml_type} of the convolution rows (0 = F32)
 * @param kRowBytes bytes of one layer's convolution window
 * @param vType     {@code ggml_type} of the SSM rows
 * @param vRowBytes bytes of one layer's SSM state
 */
public record LlamaCppRecurrentLayout(int layers, int kType, long kRowBytes, int vType, long vRowBytes) {

    /** The layout's name, the prefix of the namespace's {@code kv_layout}. */
    public static final String NAME = "llamacpp-recurrent-v1";

    private static final long HEADER_BYTES = 20;

    public LlamaCppRecurrentLayout {
        if (layers <= 0 || kRowBytes <= 0 || vRowBytes <= 0) throw new IllegalArgumentException("layers and rows must be > 0");
    }

    /**
     * The geometry of an empty recurrent sequence's blob ({@code cell_count = 0}: the layer headers
     * with no rows). Fails on anything else, e.g. an attention model's state (whose V is transposed).
     */
    public static LlamaCppRecurrentLayout ofEmpty(MemorySegment blob) {
        if (blob.byteSize() < 12 || blob.get(JAVA_INT_UNALIGNED, 0) != 0) {
            throw new IllegalStateException("not an empty sequence state (" + blob.byteSize() + " bytes)");
        }
        if (blob.get(JAVA_INT_UNALIGNED, 4) != 0) {
            throw new IllegalStateException("v_trans = 1: an attention cache, not a recurrent one");
        }
        int layers = blob.get(JAVA_INT_UNALIGNED, 8);
        if (layers <= 0 || blob.byteSize() != 12 + 24L * layers) {
            throw new IllegalStateException("empty state of " + blob.byteSize() + " bytes does not hold " + layers + " K and V headers");
        }
        int kType = blob.get(JAVA_INT_UNALIGNED, 12);
        long kRow = blob.get(JAVA_LONG_UNALIGNED, 16);
        int vType = blob.get(JAVA_INT_UNALIGNED, 12 + 12L * layers);
        long vRow = blob.get(JAVA_LONG_UNALIGNED, 16 + 12L * layers);
        LlamaCppRecurrentLayout layout = new LlamaCppRecurrentLayout(layers, kType, kRow, vType, vRow);
        for (int l = 0; l < layers; l++) {
            long k = 12 + 12L * l;
            long v = 12 + 12L * (layers + l);
            if (blob.get(JAVA_INT_UNALIGNED, k) != kType || blob.get(JAVA_LONG_UNALIGNED, k + 4) != kRow
                    || blob.get(JAVA_INT_UNALIGNED, v) != vType || blob.get(JAVA_LONG_UNALIGNED, v + 4) != vRow) {
                throw new IllegalStateException("layer " + l + " differs in shape from layer 0: " + layout);
            }
        }
        return layout;
    }

    /** The namespace's {@code kv_layout}: name and llama.cpp build. */
    public String kvLayoutName() {
        return NAME + "@" + LlamaCppAbi.BUILD_TAG;
    }

    /** Bytes of one checkpoint image. */
    public long checkpointBytes() {
        return HEADER_BYTES + layers * (12 + kRowBytes) + layers * (12 + vRowBytes);
    }

    /**
     * What is wrong with {@code image} as the checkpoint at token {@code t}: empty when it is one
     * (size, cell count, {@code pos = t - 1}, every layer header), else the first problem found.
     */
    public Optional<String> check(MemorySegment image, long t) {
        if (image.byteSize() != checkpointBytes()) {
            return Optional.of("checkpoint of " + image.byteSize() + " bytes, expected " + checkpointBytes());
        }
        if (image.get(JAVA_INT_UNALIGNED, 0) != 1) return Optional.of("cell_count " + image.get(JAVA_INT_UNALIGNED, 0) + ", expected 1");
        int pos = image.get(JAVA_INT_UNALIGNED, 4);
        if (pos != t - 1) return Optional.of("state at position " + pos + ", not the checkpoint at token " + t);
        if (image.get(JAVA_INT_UNALIGNED, 8) != 0 || image.get(JAVA_INT_UNALIGNED, 12) != 0
                || image.get(JAVA_INT_UNALIGNED, 16) != layers) {
            return Optional.of("n_seq_id / v_trans / n_layer differ from " + this);
        }
        for (int l = 0; l < layers; l++) {
            long k = HEADER_BYTES + l * (12 + kRowBytes);
            long v = HEADER_BYTES + layers * (12 + kRowBytes) + l * (12 + vRowBytes);
            if (image.get(JAVA_INT_UNALIGNED, k) != kType || image.get(JAVA_LONG_UNALIGNED, k + 4) != kRowBytes
                    || image.get(JAVA_INT_UNALIGNED, v) != vType || image.get(JAVA_LONG_UNALIGNED, v + 4) != vRowBytes) {
                return Optional.of("layer " + l + " header differs from " + this);
            }
        }
        return Optional.empty();
    }
}
