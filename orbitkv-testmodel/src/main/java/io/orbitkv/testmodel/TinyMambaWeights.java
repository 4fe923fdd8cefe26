package io.orbitkv.testmodel;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;

/**
 * The weights of a {@link TinyMambaSpec}: the tensor list in llama.cpp's Mamba names and shapes,
 * and each tensor's values, drawn from a seeded generator.
 *
 * <pre>
 *   token_embd.weight          [hidden, vocab]            N(0, 1)
 *   blk.N.attn_norm.weight     [hidden]                   1
 *   blk.N.ssm_in.weight        [hidden, 2 inner]          N(0, 1/hidden)        x and the gate z
 *   blk.N.ssm_conv1d.weight    [convKernel, inner]        N(0, 1/convKernel)
 *   blk.N.ssm_conv1d.bias      [inner]                    N(0, 0.01)
 *   blk.N.ssm_x.weight         [inner, dtRank + 2 state]  N(0, 1/inner)         dt, B, C
 *   blk.N.ssm_dt.weight        [dtRank, inner]            N(0, 1/dtRank)
 *   blk.N.ssm_dt.bias          [inner]                    softplus^-1(dt), dt log-uniform in [0.001, 0.1]
 *   blk.N.ssm_a                [state, inner]             A[i][n] = -(n + 1)
 *   blk.N.ssm_d                [inner]                    1
 *   blk.N.ssm_out.weight       [inner, hidden]            N(0, 1/inner)
 *   output_norm.weight         [hidden]                   1
 *   output.weight              [hidden, vocab]            N(0, 16/hidden)
 * </pre>
 * (GGUF dimensions, fastest first.)
 *
 * <p>Immutable and thread-safe: values are recomputed on each call. Invariant: a tensor's values
 * depend only on the spec's seed and the tensor's index, so the file and {@link #digestHex()}
 * always agree.
 *
 * <p>Design note: the initialisation follows the Mamba paper's (S4D-real {@code A}, a step size
 * log-uniform in [0.001, 0.1] through the bias, {@code D} = 1) so the scan is stable (every
 * {@code exp(dt A)} below 1) and the state after a prompt really depends on its whole history;
 * {@code A} is written as the negative values llama.cpp reads ({@code ssm_a} holds
 * {@code -exp(A_log)}), not as the logarithm a checkpoint on disk would hold. The LM head's larger
 * spread (as in {@link TinyLlamaWeights}) keeps greedy choices well above float noise. Same
 * generator and seeding scheme as {@link TinyLlamaWeights} ({@code java.util.Random} is specified
 * bit for bit).
 */
public final class TinyMambaWeights {

    private static final double DT_MIN = 0.001;
    private static final double DT_MAX = 0.1;

    private final TinyMambaSpec spec;
    private final List<LlamaTensor> tensors;

    public TinyMambaWeights(TinyMambaSpec spec) {
        this.spec = spec;
        this.tensors = plan(spec);
    }

    public TinyMambaSpec spec() {
        return spec;
    }

    /** Tensors in canonical order: embeddings, each layer's ten, final norm, LM head. */
    public List<LlamaTensor> tensors() {
        return tensors;
    }

    /** The tensor's values in GGUF element order (row-major over [rows][cols]). */
    public float[] values(LlamaTensor t) {
        float[] v = new float[Math.toIntExact(t.elements())];
        String name = t.ggufName();
        if (name.endsWith(".ssm_a")) {
            for (int i = 0; i < t.rows(); i++) {
                for (int n = 0; n < t.cols(); n++) v[i * t.cols() + n] = -(n + 1);
            }
            return v;
        }
        if (t.std() == 0) {
            Arrays.fill(v, 1f);
            return v;
        }
        Random random = new Random(spec.seed() * 0x9E37_79B9_7F4A_7C15L + t.index());
        if (name.endsWith(".ssm_dt.bias")) {
            for (int i = 0; i < v.length; i++) {
                double dt = Math.exp(Math.log(DT_MIN) + random.nextDouble() * (Math.log(DT_MAX) - Math.log(DT_MIN)));
                v[i] = (float) (dt + Math.log(-Math.expm1(-dt)));         // softplus(v) = dt
            }
            return v;
        }
        for (int i = 0; i < v.length; i++) v[i] = (float) (random.nextGaussian() * t.std());
        return v;
    }

    /**
     * SHA-256 over every tensor in canonical order: u32 LE name length, UTF-8 GGUF name, u32 LE
     * rank, u64 LE dims (slowest first), then the F32 LE values.
     */
    public byte[] digest() {
        MessageDigest sha = TinyLlamaWeights.sha256();
        for (LlamaTensor t : tensors) {
            byte[] name = t.ggufName().getBytes(StandardCharsets.UTF_8);
            long[] shape = t.hfShape();
            ByteBuffer head = ByteBuffer.allocate(8 + name.length + 8 * shape.length).order(ByteOrder.LITTLE_ENDIAN);
            head.putInt(name.length).put(name).putInt(shape.length);
            for (long d : shape) head.putLong(d);
            sha.update(head.array());
            sha.update(TinyLlamaWeights.littleEndian(values(t)));
        }
        return sha.digest();
    }

    /** {@link #digest()} as 64 lower-case hex digits. */
    public String digestHex() {
        return HexFormat.of().formatHex(digest());
    }

    private static List<LlamaTensor> plan(TinyMambaSpec s) {
        List<LlamaTensor> out = new ArrayList<>();
        int h = s.hidden();
        int d = s.inner();
        add(out, "token_embd.weight", s.vocab(), h, 1.0);
        for (int l = 0; l < s.layers(); l++) {
            String b = "blk." + l + ".";
            vector(out, b + "attn_norm.weight", h, 0);
            add(out, b + "ssm_in.weight", 2 * d, h, 1 / Math.sqrt(h));
            add(out, b + "ssm_conv1d.weight", d, s.convKernel(), 1 / Math.sqrt(s.convKernel()));
            vector(out, b + "ssm_conv1d.bias", d, 0.1);
            add(out, b + "ssm_x.weight", s.timeStepRank() + 2 * s.stateSize(), d, 1 / Math.sqrt(d));
            add(out, b + "ssm_dt.weight", d, s.timeStepRank(), 1 / Math.sqrt(s.timeStepRank()));
            vector(out, b + "ssm_dt.bias", d, 1);
            add(out, b + "ssm_a", d, s.stateSize(), 1);
            vector(out, b + "ssm_d", d, 0);
            add(out, b + "ssm_out.weight", h, d, 1 / Math.sqrt(d));
        }
        vector(out, "output_norm.weight", h, 0);
        add(out, "output.weight", s.vocab(), h, 4 / Math.sqrt(h));
        return List.copyOf(out);
    }

    private static void add(List<LlamaTensor> out, String name, int rows, int cols, double std) {
        out.add(new LlamaTensor(out.size(), name, name, rows, cols, std, 0, false));
    }

    private static void vector(List<LlamaTensor> out, String name, int length, double std) {
        out.add(new LlamaTensor(out.size(), name, name, 1, length, std, 0, true));
    }
}
