package io.orbitkv.llamacpp;

import io.orbitkv.engine.FullAttention;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.testmodel.TinyLlamaModel;
import io.orbitkv.testmodel.TinyMambaModel;

/**
 * The OrbitKV identity of a llama.cpp KV cache: which engines may share pages.
 *
 * <p>Stateless. The namespace binds: the model id and revision, the weights digest (SHA-256 of
 * the weights, the same digest the Jlama adapter uses for the same generated weights), the
 * tokenizer digest, the KV dtype (from the layout's K type, "f16" by default), the kv_layout
 * {@link LlamaCppKvPageLayout#kvLayoutName()} (layout name + llama.cpp build tag + V order), the
 * page size, TP 1 / rank 0, PP 1 / rank 0, format 1. Other weights, another llama.cpp build or
 * another V order give another digest and so other keys: a miss, never a foreign page.
 *
 * <p>Design note: the build tag is in the kv_layout because the page bytes are a slice of that
 * build's {@code llama_state_seq_get_data} format; Jlama and llama.cpp pages of the same model
 * never mix (F32 vectors vs F16 rows). Full attention: {@link FullAttention#contract}.
 */
public final class LlamaCppNamespace {

    /** Storage format version of {@link LlamaCppKvPageLayout} images. */
    public static final int FORMAT_VERSION = 1;

    private LlamaCppNamespace() {
    }

    /** The namespace of a generated model served by llama.cpp in {@code layout}. */
    public static Namespace of(TinyLlamaModel model, LlamaCppKvPageLayout layout) {
        return of(model.spec().name(), "seed-" + model.spec().seed(), model.weightsDigestHex(),
                model.tokenizerDigestHex(), layout);
    }

    /** The namespace from its parts. */
    public static Namespace of(String modelId, String revision, String weightsDigestHex, String tokenizerDigestHex,
                               LlamaCppKvPageLayout layout) {
        return new Namespace(modelId, revision, weightsDigestHex, tokenizerDigestHex, "", dtype(layout.kType()),
                layout.kvLayoutName(), layout.pageTokens(), 1, 0, 1, 0, FORMAT_VERSION);
    }

    /**
     * The namespace of a generated Mamba model served by llama.cpp with recurrent checkpoints of
     * {@code layout} at {@code pageTokens}-token boundaries: dtype from the state's type
     * ("f32"), kv_layout {@link LlamaCppRecurrentLayout#kvLayoutName()}.
     */
    public static Namespace ofRecurrent(TinyMambaModel model, LlamaCppRecurrentLayout layout, int pageTokens) {
        return new Namespace(model.spec().name(), "seed-" + model.spec().seed(), model.weightsDigestHex(),
                model.tokenizerDigestHex(), "", dtype(layout.kType()), layout.kvLayoutName(), pageTokens, 1, 0, 1, 0,
                FORMAT_VERSION);
    }

    /** Full attention: one {@code full} group. */
    public static RecoveryContract contract(int pageTokens) {
        return FullAttention.contract(pageTokens);
    }

    static String dtype(int ggmlType) {
        return switch (ggmlType) {
            case 0 -> "f32";
            case 1 -> "f16";
            case 30 -> "bf16";
            default -> throw new IllegalArgumentException("ggml_type " + ggmlType + " has no " + LlamaCppKvPageLayout.NAME + " dtype");
        };
    }
}
