package io.orbitkv.testmodel;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;

/**
 * The weights of a {@link TinyLlamaSpec}: the canonical tensor list and each tensor's values,
 * drawn from a seeded generator.
 *
 * <p>Immutable and thread-safe: values are recomputed on each call, never cached, so a writer
 * holds at most one tensor in memory (the bench preset's largest, the 512 x 1376 FFN, is 2.8 MB).
 * Invariant: {@link #hfValues} of a tensor depends only on the spec's seed and the tensor's
 * index, so the two file formats and {@link #digestHex()} always agree.
 *
 * <p>Design note: each tensor gets its own {@link Random} seeded from (seed, index) instead of one
 * stream for the whole model, so a writer may visit tensors in any order. {@code java.util.Random}
 * and its {@code nextGaussian} are specified bit for bit by the JDK (a 48-bit LCG and the polar
 * method with {@code StrictMath}), so the bytes do not depend on the JDK build; SplittableRandom's
 * Gaussian is not specified that tightly. Init: embeddings N(0, 1), projections N(0, 1/fan_in),
 * the LM head N(0, 16/hidden) so greedy choices are decisive (logit gaps well above float noise),
 * norm weights 1.
 */
public final class TinyLlamaWeights {

    private final TinyLlamaSpec spec;
    private final List<LlamaTensor> tensors;

    public TinyLlamaWeights(TinyLlamaSpec spec) {
        this.spec = spec;
        this.tensors = plan(spec);
    }

    public TinyLlamaSpec spec() {
        return spec;
    }

    /** Tensors in canonical order: embeddings, each layer's nine, final norm, LM head. */
    public List<LlamaTensor> tensors() {
        return tensors;
    }

    /** Total F32 bytes of all tensors. */
    public long totalBytes() {
        long sum = 0;
        for (LlamaTensor t : tensors) sum += t.bytes();
        return sum;
    }

    /** The tensor's values in HF row-major order. */
    public float[] hfValues(LlamaTensor t) {
        float[] v = new float[Math.toIntExact(t.elements())];
        if (t.std() == 0) {
            java.util.Arrays.fill(v, 1f);
            return v;
        }
        Random random = new Random(spec.seed() * 0x9E37_79B9_7F4A_7C15L + t.index());
        for (int i = 0; i < v.length; i++) v[i] = (float) (random.nextGaussian() * t.std());
        return v;
    }

    /**
     * The tensor's values as llama.cpp wants them. Q and K rows are reordered within each head:
     * HF's rotary embedding pairs element {@code j} with {@code j + d/2} ("rotate half"), while
     * llama.cpp's pairs {@code 2j} with {@code 2j+1}. Row {@code j} of the first half moves to
     * {@code 2j}, row {@code j} of the second half to {@code 2j+1}; both engines then compute the
     * same attention scores.
     */
    public float[] ggufValues(LlamaTensor t) {
        float[] hf = hfValues(t);
        if (t.ropeHeads() == 0) return hf;
        int headRows = t.rows() / t.ropeHeads();
        int half = headRows / 2;
        int cols = t.cols();
        float[] out = new float[hf.length];
        for (int h = 0; h < t.ropeHeads(); h++) {
            int base = h * headRows;
            for (int j = 0; j < half; j++) {
                System.arraycopy(hf, (base + j) * cols, out, (base + 2 * j) * cols, cols);
                System.arraycopy(hf, (base + half + j) * cols, out, (base + 2 * j + 1) * cols, cols);
            }
        }
        return out;
    }

    /**
     * SHA-256 over every tensor in canonical order: u32 LE name length, UTF-8 HF name, u32 LE
     * rank, u64 LE dims (HF order), then the F32 LE values. Independent of the file format.
     */
    public byte[] digest() {
        MessageDigest sha = sha256();
        for (LlamaTensor t : tensors) {
            byte[] name = t.hfName().getBytes(StandardCharsets.UTF_8);
            long[] shape = t.hfShape();
            ByteBuffer head = ByteBuffer.allocate(8 + name.length + 8 * shape.length).order(ByteOrder.LITTLE_ENDIAN);
            head.putInt(name.length).put(name).putInt(shape.length);
            for (long d : shape) head.putLong(d);
            sha.update(head.array());
            sha.update(littleEndian(hfValues(t)));
        }
        return sha.digest();
    }

    /** {@link #digest()} as 64 lower-case hex digits. */
    public String digestHex() {
        return HexFormat.of().formatHex(digest());
    }

    static byte[] littleEndian(float[] values) {
        ByteBuffer out = ByteBuffer.allocate(values.length * Float.BYTES).order(ByteOrder.LITTLE_ENDIAN);
        out.asFloatBuffer().put(values);
        return out.array();
    }

    static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every JDK has SHA-256", e);
        }
    }

    private static List<LlamaTensor> plan(TinyLlamaSpec s) {
        List<LlamaTensor> out = new ArrayList<>();
        int h = s.hidden();
        int kv = s.kvWidth();
        double projStd = 1 / Math.sqrt(h);
        out.add(new LlamaTensor(out.size(), "model.embed_tokens.weight", "token_embd.weight", s.vocab(), h, 1.0, 0, false));
        for (int l = 0; l < s.layers(); l++) {
            String hf = "model.layers." + l + ".";
            String gg = "blk." + l + ".";
            out.add(new LlamaTensor(out.size(), hf + "self_attn.q_proj.weight", gg + "attn_q.weight", h, h, projStd, s.heads(), false));
            out.add(new LlamaTensor(out.size(), hf + "self_attn.k_proj.weight", gg + "attn_k.weight", kv, h, projStd, s.kvHeads(), false));
            out.add(new LlamaTensor(out.size(), hf + "self_attn.v_proj.weight", gg + "attn_v.weight", kv, h, projStd, 0, false));
            out.add(new LlamaTensor(out.size(), hf + "self_attn.o_proj.weight", gg + "attn_output.weight", h, h, projStd, 0, false));
            out.add(new LlamaTensor(out.size(), hf + "mlp.gate_proj.weight", gg + "ffn_gate.weight", s.intermediate(), h, projStd, 0, false));
            out.add(new LlamaTensor(out.size(), hf + "mlp.up_proj.weight", gg + "ffn_up.weight", s.intermediate(), h, projStd, 0, false));
            out.add(new LlamaTensor(out.size(), hf + "mlp.down_proj.weight", gg + "ffn_down.weight", h, s.intermediate(),
                    1 / Math.sqrt(s.intermediate()), 0, false));
            out.add(new LlamaTensor(out.size(), hf + "input_layernorm.weight", gg + "attn_norm.weight", 1, h, 0, 0, true));
            out.add(new LlamaTensor(out.size(), hf + "post_attention_layernorm.weight", gg + "ffn_norm.weight", 1, h, 0, 0, true));
        }
        out.add(new LlamaTensor(out.size(), "model.norm.weight", "output_norm.weight", 1, h, 0, 0, true));
        out.add(new LlamaTensor(out.size(), "lm_head.weight", "output.weight", s.vocab(), h, 4 / Math.sqrt(h), 0, false));
        return List.copyOf(out);
    }
}
