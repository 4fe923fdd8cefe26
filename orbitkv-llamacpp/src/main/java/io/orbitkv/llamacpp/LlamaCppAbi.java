package io.orbitkv.llamacpp;

import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.List;

import static java.lang.foreign.MemoryLayout.PathElement.groupElement;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BOOLEAN;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * The C ABI of the llama.cpp build inside {@code de.kherud:llama:4.2.0}: the struct layouts this
 * adapter passes by value, and the startup check that the loaded library is that build.
 *
 * <p><b>Source.</b> llama.cpp tag {@value #BUILD_TAG}, commit {@value #COMMIT_FULL}
 * (2025-03-18, "speculative : fix seg fault in certain cases (#12454)"), file
 * {@code include/llama.h}: {@code struct llama_model_params} (line 280), {@code struct
 * llama_context_params} (line 313), {@code typedef struct llama_batch} (line 249). The version
 * was established three ways that agree: java-llama.cpp's {@code CMakeLists.txt} at tag
 * {@code v4.2.0} fetches llama.cpp with {@code GIT_TAG b4916}; the library's exported data
 * symbols {@code LLAMA_BUILD_NUMBER} = 4916 and {@code LLAMA_COMMIT} = "c6af2161"; that commit
 * is tag b4916 upstream. Default values checked below are from that commit's
 * {@code src/llama-context.cpp} ({@code llama_context_default_params}) and
 * {@code src/llama-model.cpp} ({@code llama_model_default_params}).
 *
 * <pre>
 *   llama_model_params (64 B)                 llama_context_params (120 B)
 *    0 devices          ptr                    0 n_ctx u32        4 n_batch u32     8 n_ubatch u32
 *    8 n_gpu_layers     i32                   12 n_seq_max u32   16 n_threads i32  20 n_threads_batch i32
 *   12 split_mode       i32 (enum)            24 rope_scaling_type, 28 pooling_type, 32 attention_type (enums)
 *   16 main_gpu         i32  (+4 pad)         36 rope_freq_base f32 .. 56 yarn_beta_slow f32 (6 floats)
 *   24 tensor_split     ptr                   60 yarn_orig_ctx u32  64 defrag_thold f32  (+4 pad)
 *   32 progress_callback ptr                  72 cb_eval ptr     80 cb_eval_user_data ptr
 *   40 progress_callback_user_data ptr        88 type_k i32      92 type_v i32 (enum ggml_type)
 *   48 kv_overrides     ptr                   96 logits_all 97 embeddings 98 offload_kqv 99 flash_attn
 *   56 vocab_only 57 use_mmap 58 use_mlock    100 no_perf (bool, +3 pad)
 *   59 check_tensors (bool, +4 pad)          104 abort_callback ptr  112 abort_callback_data ptr
 *
 *   llama_batch (56 B): 0 n_tokens i32 (+4 pad), 8 token*, 16 embd*, 24 pos*, 32 n_seq_id*,
 *                       40 seq_id**, 48 logits (int8_t*)
 * </pre>
 *
 * <p>Immutable constants and pure functions; thread-safe. The startup check
 * ({@link #mismatches}) compares the build symbols and every field of both default-parameter
 * structs, as returned by the library into these layouts, with the values of that source; any
 * difference is named in the error, so a different bundled build fails before the first wrong
 * offset is written.
 *
 * <p>Design note: layouts are declared field by field from the header rather than as opaque
 * 64/120-byte blocks, so {@link #CONTEXT_PARAMS}'s VarHandles document and check each offset
 * (e.g. {@code type_k} at 88); the by-value returns would silently corrupt the stack of a build
 * with a larger struct (llama.cpp added {@code tensor_buft_overrides} to the model params two
 * weeks after b4916), which is why the build symbols are checked first.
 */
public final class LlamaCppAbi {

    /** The llama.cpp release tag of the bundled build. */
    public static final String BUILD_TAG = "b4916";
    /** {@code LLAMA_BUILD_NUMBER} of that build. */
    public static final int BUILD_NUMBER = 4916;
    /** {@code LLAMA_COMMIT} of that build (short hash). */
    public static final String COMMIT = "c6af2161";
    /** The full upstream commit. */
    public static final String COMMIT_FULL = "c6af2161b200284d55633cf184a07406ca89908e";

    /** {@code enum ggml_type} GGML_TYPE_F32. */
    public static final int GGML_TYPE_F32 = 0;
    /** {@code enum ggml_type} GGML_TYPE_F16, the default K and V cache type. */
    public static final int GGML_TYPE_F16 = 1;

    public static final StructLayout MODEL_PARAMS = MemoryLayout.structLayout(
            ADDRESS.withName("devices"),
            JAVA_INT.withName("n_gpu_layers"),
            JAVA_INT.withName("split_mode"),
            JAVA_INT.withName("main_gpu"),
            MemoryLayout.paddingLayout(4),
            ADDRESS.withName("tensor_split"),
            ADDRESS.withName("progress_callback"),
            ADDRESS.withName("progress_callback_user_data"),
            ADDRESS.withName("kv_overrides"),
            JAVA_BOOLEAN.withName("vocab_only"),
            JAVA_BOOLEAN.withName("use_mmap"),
            JAVA_BOOLEAN.withName("use_mlock"),
            JAVA_BOOLEAN.withName("check_tensors"),
            MemoryLayout.paddingLayout(4)).withName("llama_model_params");

    public static final StructLayout CONTEXT_PARAMS = MemoryLayout.structLayout(
            JAVA_INT.withName("n_ctx"),
            JAVA_INT.withName("n_batch"),
            JAVA_INT.withName("n_ubatch"),
            JAVA_INT.withName("n_seq_max"),
            JAVA_INT.withName("n_threads"),
            JAVA_INT.withName("n_threads_batch"),
            JAVA_INT.withName("rope_scaling_type"),
            JAVA_INT.withName("pooling_type"),
            JAVA_INT.withName("attention_type"),
            JAVA_FLOAT.withName("rope_freq_base"),
            JAVA_FLOAT.withName("rope_freq_scale"),
            JAVA_FLOAT.withName("yarn_ext_factor"),
            JAVA_FLOAT.withName("yarn_attn_factor"),
            JAVA_FLOAT.withName("yarn_beta_fast"),
            JAVA_FLOAT.withName("yarn_beta_slow"),
            JAVA_INT.withName("yarn_orig_ctx"),
            JAVA_FLOAT.withName("defrag_thold"),
            MemoryLayout.paddingLayout(4),
            ADDRESS.withName("cb_eval"),
            ADDRESS.withName("cb_eval_user_data"),
            JAVA_INT.withName("type_k"),
            JAVA_INT.withName("type_v"),
            JAVA_BOOLEAN.withName("logits_all"),
            JAVA_BOOLEAN.withName("embeddings"),
            JAVA_BOOLEAN.withName("offload_kqv"),
            JAVA_BOOLEAN.withName("flash_attn"),
            JAVA_BOOLEAN.withName("no_perf"),
            MemoryLayout.paddingLayout(3),
            ADDRESS.withName("abort_callback"),
            ADDRESS.withName("abort_callback_data")).withName("llama_context_params");

    public static final StructLayout BATCH = MemoryLayout.structLayout(
            JAVA_INT.withName("n_tokens"),
            MemoryLayout.paddingLayout(4),
            ADDRESS.withName("token"),
            ADDRESS.withName("embd"),
            ADDRESS.withName("pos"),
            ADDRESS.withName("n_seq_id"),
            ADDRESS.withName("seq_id"),
            ADDRESS.withName("logits")).withName("llama_batch");

    /** Sizes read off the disassembly of the two default-parameter functions in the bundled library. */
    static final long MODEL_PARAMS_BYTES = 64;
    static final long CONTEXT_PARAMS_BYTES = 120;
    static final long BATCH_BYTES = 56;

    private LlamaCppAbi() {
    }

    /** Sets an {@code int}/{@code u32}/enum field of {@link #CONTEXT_PARAMS}. */
    public static void setContextInt(MemorySegment params, String field, int value) {
        handle(CONTEXT_PARAMS, field).set(params, 0L, value);
    }

    /** Sets a {@code bool} field of {@link #CONTEXT_PARAMS}. */
    public static void setContextBool(MemorySegment params, String field, boolean value) {
        handle(CONTEXT_PARAMS, field).set(params, 0L, value);
    }

    /** Byte offset of {@code field} in {@code struct}. */
    public static long offset(StructLayout struct, String field) {
        return struct.byteOffset(groupElement(field));
    }

    /**
     * What differs between the loaded library and the {@value #BUILD_TAG} header: empty when they
     * match, else one line per field naming it, the expected and the found value.
     *
     * @param buildNumber     the library's {@code LLAMA_BUILD_NUMBER}
     * @param commit          the library's {@code LLAMA_COMMIT}
     * @param modelDefaults   {@code llama_model_default_params()} read into {@link #MODEL_PARAMS}
     * @param contextDefaults {@code llama_context_default_params()} read into {@link #CONTEXT_PARAMS}
     */
    public static List<String> mismatches(int buildNumber, String commit, MemorySegment modelDefaults,
                                          MemorySegment contextDefaults) {
        List<String> out = new ArrayList<>();
        if (buildNumber != BUILD_NUMBER) out.add("LLAMA_BUILD_NUMBER: expected " + BUILD_NUMBER + ", found " + buildNumber);
        if (!COMMIT.equals(commit)) out.add("LLAMA_COMMIT: expected " + COMMIT + ", found " + commit);
        if (MODEL_PARAMS.byteSize() != MODEL_PARAMS_BYTES) out.add("llama_model_params size " + MODEL_PARAMS.byteSize());
        if (CONTEXT_PARAMS.byteSize() != CONTEXT_PARAMS_BYTES) out.add("llama_context_params size " + CONTEXT_PARAMS.byteSize());
        if (BATCH.byteSize() != BATCH_BYTES) out.add("llama_batch size " + BATCH.byteSize());

        expect(out, MODEL_PARAMS, modelDefaults, "devices", MemorySegment.NULL);
        expect(out, MODEL_PARAMS, modelDefaults, "n_gpu_layers", 0);
        expect(out, MODEL_PARAMS, modelDefaults, "split_mode", 1);                  // LLAMA_SPLIT_MODE_LAYER
        expect(out, MODEL_PARAMS, modelDefaults, "main_gpu", 0);
        expect(out, MODEL_PARAMS, modelDefaults, "tensor_split", MemorySegment.NULL);
        expect(out, MODEL_PARAMS, modelDefaults, "progress_callback", MemorySegment.NULL);
        expect(out, MODEL_PARAMS, modelDefaults, "progress_callback_user_data", MemorySegment.NULL);
        expect(out, MODEL_PARAMS, modelDefaults, "kv_overrides", MemorySegment.NULL);
        expect(out, MODEL_PARAMS, modelDefaults, "vocab_only", false);
        expect(out, MODEL_PARAMS, modelDefaults, "use_mmap", true);
        expect(out, MODEL_PARAMS, modelDefaults, "use_mlock", false);
        expect(out, MODEL_PARAMS, modelDefaults, "check_tensors", false);

        expect(out, CONTEXT_PARAMS, contextDefaults, "n_ctx", 512);
        expect(out, CONTEXT_PARAMS, contextDefaults, "n_batch", 2048);
        expect(out, CONTEXT_PARAMS, contextDefaults, "n_ubatch", 512);
        expect(out, CONTEXT_PARAMS, contextDefaults, "n_seq_max", 1);
        expect(out, CONTEXT_PARAMS, contextDefaults, "n_threads", 4);               // GGML_DEFAULT_N_THREADS
        expect(out, CONTEXT_PARAMS, contextDefaults, "n_threads_batch", 4);
        expect(out, CONTEXT_PARAMS, contextDefaults, "rope_scaling_type", -1);      // *_UNSPECIFIED
        expect(out, CONTEXT_PARAMS, contextDefaults, "pooling_type", -1);
        expect(out, CONTEXT_PARAMS, contextDefaults, "attention_type", -1);
        expect(out, CONTEXT_PARAMS, contextDefaults, "rope_freq_base", 0.0f);
        expect(out, CONTEXT_PARAMS, contextDefaults, "rope_freq_scale", 0.0f);
        expect(out, CONTEXT_PARAMS, contextDefaults, "yarn_ext_factor", -1.0f);
        expect(out, CONTEXT_PARAMS, contextDefaults, "yarn_attn_factor", 1.0f);
        expect(out, CONTEXT_PARAMS, contextDefaults, "yarn_beta_fast", 32.0f);
        expect(out, CONTEXT_PARAMS, contextDefaults, "yarn_beta_slow", 1.0f);
        expect(out, CONTEXT_PARAMS, contextDefaults, "yarn_orig_ctx", 0);
        expect(out, CONTEXT_PARAMS, contextDefaults, "defrag_thold", -1.0f);
        expect(out, CONTEXT_PARAMS, contextDefaults, "cb_eval", MemorySegment.NULL);
        expect(out, CONTEXT_PARAMS, contextDefaults, "cb_eval_user_data", MemorySegment.NULL);
        expect(out, CONTEXT_PARAMS, contextDefaults, "type_k", GGML_TYPE_F16);
        expect(out, CONTEXT_PARAMS, contextDefaults, "type_v", GGML_TYPE_F16);
        expect(out, CONTEXT_PARAMS, contextDefaults, "logits_all", false);
        expect(out, CONTEXT_PARAMS, contextDefaults, "embeddings", false);
        expect(out, CONTEXT_PARAMS, contextDefaults, "offload_kqv", true);
        expect(out, CONTEXT_PARAMS, contextDefaults, "flash_attn", false);
        expect(out, CONTEXT_PARAMS, contextDefaults, "no_perf", true);
        expect(out, CONTEXT_PARAMS, contextDefaults, "abort_callback", MemorySegment.NULL);
        expect(out, CONTEXT_PARAMS, contextDefaults, "abort_callback_data", MemorySegment.NULL);
        return out;
    }

    private static void expect(List<String> out, StructLayout struct, MemorySegment s, String field, Object expected) {
        Object found = handle(struct, field).get(s, 0L);
        boolean same = switch (found) {
            case MemorySegment address -> address.address() == ((MemorySegment) expected).address();
            case Float f -> Float.floatToRawIntBits(f) == Float.floatToRawIntBits((Float) expected);
            default -> found.equals(expected);
        };
        if (!same) {
            Object shown = found instanceof MemorySegment a ? "0x" + Long.toHexString(a.address()) : found;
            Object want = expected instanceof MemorySegment a ? "0x" + Long.toHexString(a.address()) : expected;
            out.add(struct.name().orElseThrow() + "." + field + " (offset " + offset(struct, field) + "): expected "
                    + want + ", found " + shown);
        }
    }

    private static VarHandle handle(StructLayout struct, String field) {
        return struct.varHandle(groupElement(field));
    }
}
