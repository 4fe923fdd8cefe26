package io.orbitkv.jlama;

import io.orbitkv.engine.FullAttention;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.testmodel.TinyLlamaModel;

/**
 * The OrbitKV identity of a Jlama KV cache: which engines may share pages, and the rule for
 * which pages a restore needs.
 *
 * <p>Stateless. The namespace binds: the model id, the weights digest (SHA-256 of the weights),
 * the tokenizer digest (SHA-256 of tokenizer.json), dtype {@value JlamaKvPageLayout#DTYPE},
 * layout {@value JlamaKvPageLayout#NAME}, the page size, TP 1 / rank 0, PP 1 / rank 0, format 1.
 * Any difference, e.g. other weights, gives another digest and so other keys: a miss.
 *
 * <p>Design note: a Llama model is full attention in every layer, so the contract is one
 * {@code full} group (id {@value #GROUP}): restoring to boundary {@code t} needs every page
 * {@code [0, t/P)}; there is no window or recurrent state to checkpoint.
 */
public final class JlamaNamespace {

    /** The one state group: all layers' K and V. */
    public static final int GROUP = FullAttention.GROUP;
    /** Storage format version of {@link JlamaKvPageLayout} images. */
    public static final int FORMAT_VERSION = 1;

    private JlamaNamespace() {
    }

    /** The namespace of a generated model served with {@code pageTokens}-token pages. */
    public static Namespace of(TinyLlamaModel model, int pageTokens) {
        return of(model.spec().name(), "seed-" + model.spec().seed(), model.weightsDigestHex(),
                model.tokenizerDigestHex(), pageTokens);
    }

    /** The namespace from its parts. */
    public static Namespace of(String modelId, String revision, String weightsDigestHex, String tokenizerDigestHex,
                               int pageTokens) {
        return new Namespace(modelId, revision, weightsDigestHex, tokenizerDigestHex, "",
                JlamaKvPageLayout.DTYPE, JlamaKvPageLayout.NAME, pageTokens, 1, 0, 1, 0, FORMAT_VERSION);
    }

    /** Full attention: one {@code full} group. */
    public static RecoveryContract contract(int pageTokens) {
        return FullAttention.contract(pageTokens);
    }
}
