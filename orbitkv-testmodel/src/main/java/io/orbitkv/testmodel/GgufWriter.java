package io.orbitkv.testmodel;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * Writes a GGUF version 3 file with F32 tensors, and the Llama or Mamba metadata llama.cpp's loader reads.
 *
 * <pre>
 *   u32 magic "GGUF" (0x46554747 LE) | u32 version = 3 | u64 tensor count | u64 metadata count
 *   metadata: { string key | u32 gguf_type | value }*        string = u64 length + UTF-8 bytes
 *             array value = u32 element type | u64 count | elements
 *   tensor infos: { string name | u32 n_dims | u64 dims[n_dims] (fastest first)
 *                   | u32 ggml_type (0 = F32) | u64 offset from the data start }*
 *   zero padding to general.alignment (32)
 *   tensor data, each tensor starting at a multiple of the alignment, zero-padded between
 * </pre>
 *
 * <p>Stateless; one call writes one file. Invariant: every tensor offset is a multiple of
 * {@link #ALIGNMENT} and the data section starts at one, which is what {@code general.alignment}
 * promises the loader (it maps the file and checks both).
 *
 * <p>Design note: llama.cpp reads {@code llama.*} hyperparameters by architecture prefix and
 * needs {@code tokenizer.ggml.{model,tokens,scores,token_type}} plus the special ids; the vocabulary
 * is written as an SPM ("llama") vocab with byte tokens, matching {@link ByteFallbackVocab}.
 */
public final class GgufWriter {

    /** GGUF magic, as the u32 read little-endian from "GGUF". */
    public static final int MAGIC = 0x4655_4747;
    /** Format version written. */
    public static final int VERSION = 3;
    /** Data alignment in bytes (also written as {@code general.alignment}). */
    public static final int ALIGNMENT = 32;
    /** {@code ggml_type} of F32. */
    public static final int GGML_TYPE_F32 = 0;

    private GgufWriter() {
    }

    /** The metadata of a Llama model in llama.cpp's keys, in the order written. */
    public static Map<String, GgufValue> llamaMetadata(TinyLlamaSpec s) {
        Map<String, GgufValue> kv = general("llama", s.name());
        kv.put("llama.context_length", new GgufValue.U32(s.context()));
        kv.put("llama.embedding_length", new GgufValue.U32(s.hidden()));
        kv.put("llama.block_count", new GgufValue.U32(s.layers()));
        kv.put("llama.feed_forward_length", new GgufValue.U32(s.intermediate()));
        kv.put("llama.rope.dimension_count", new GgufValue.U32(s.headSize()));
        kv.put("llama.rope.freq_base", new GgufValue.F32(TinyLlamaSpec.ROPE_THETA));
        kv.put("llama.attention.head_count", new GgufValue.U32(s.heads()));
        kv.put("llama.attention.head_count_kv", new GgufValue.U32(s.kvHeads()));
        kv.put("llama.attention.layer_norm_rms_epsilon", new GgufValue.F32(TinyLlamaSpec.RMS_NORM_EPS));
        kv.put("llama.vocab_size", new GgufValue.U32(s.vocab()));
        putVocab(kv, s.vocab());
        return kv;
    }

    /**
     * The metadata of a Mamba-1 model ({@code general.architecture = "mamba"}) in the keys the
     * bundled llama.cpp's loader reads for that architecture: no attention heads and no
     * feed-forward block; {@code mamba.ssm.*} gives the convolution kernel, the inner (expanded)
     * width, the state size and the rank of the step projection.
     */
    public static Map<String, GgufValue> mambaMetadata(TinyMambaSpec s) {
        Map<String, GgufValue> kv = general("mamba", s.name());
        kv.put("mamba.context_length", new GgufValue.U32(s.context()));
        kv.put("mamba.embedding_length", new GgufValue.U32(s.hidden()));
        kv.put("mamba.block_count", new GgufValue.U32(s.layers()));
        kv.put("mamba.feed_forward_length", new GgufValue.U32(0));
        kv.put("mamba.attention.head_count", new GgufValue.U32(0));
        kv.put("mamba.ssm.conv_kernel", new GgufValue.U32(s.convKernel()));
        kv.put("mamba.ssm.inner_size", new GgufValue.U32(s.inner()));
        kv.put("mamba.ssm.state_size", new GgufValue.U32(s.stateSize()));
        kv.put("mamba.ssm.time_step_rank", new GgufValue.U32(s.timeStepRank()));
        kv.put("mamba.ssm.dt_b_c_rms", new GgufValue.Bool(false));
        kv.put("mamba.attention.layer_norm_rms_epsilon", new GgufValue.F32(TinyLlamaSpec.RMS_NORM_EPS));
        putVocab(kv, s.vocab());
        return kv;
    }

    /** The {@code general.*} keys, first in every file: architecture, name, alignment, all-F32 file type. */
    private static Map<String, GgufValue> general(String architecture, String name) {
        Map<String, GgufValue> kv = new LinkedHashMap<>();
        kv.put("general.architecture", new GgufValue.Str(architecture));
        kv.put("general.name", new GgufValue.Str(name));
        kv.put("general.alignment", new GgufValue.U32(ALIGNMENT));
        kv.put("general.file_type", new GgufValue.U32(0));
        return kv;
    }

    /** The {@link ByteFallbackVocab} as an SPM ("llama") vocabulary with byte tokens and the special ids. */
    private static void putVocab(Map<String, GgufValue> kv, int vocab) {
        List<ByteFallbackVocab.Token> tokens = ByteFallbackVocab.tokens(vocab);
        List<String> pieces = new ArrayList<>(tokens.size());
        int[] types = new int[tokens.size()];
        for (ByteFallbackVocab.Token t : tokens) {
            pieces.add(t.ggufPiece());
            types[t.id()] = t.kind().ggufCode;
        }
        kv.put("tokenizer.ggml.model", new GgufValue.Str("llama"));
        kv.put("tokenizer.ggml.tokens", new GgufValue.StrArray(pieces));
        kv.put("tokenizer.ggml.scores", new GgufValue.F32Array(new float[tokens.size()]));
        kv.put("tokenizer.ggml.token_type", new GgufValue.I32Array(types));
        kv.put("tokenizer.ggml.bos_token_id", new GgufValue.U32(ByteFallbackVocab.BOS));
        kv.put("tokenizer.ggml.eos_token_id", new GgufValue.U32(ByteFallbackVocab.EOS));
        kv.put("tokenizer.ggml.unknown_token_id", new GgufValue.U32(ByteFallbackVocab.UNK));
        kv.put("tokenizer.ggml.add_bos_token", new GgufValue.Bool(true));
        kv.put("tokenizer.ggml.add_eos_token", new GgufValue.Bool(false));
    }

    /** Writes the model to {@code file} (metadata of {@link #llamaMetadata}) and returns its size. */
    public static long write(TinyLlamaWeights weights, Path file) throws IOException {
        return write(llamaMetadata(weights.spec()), weights.tensors(), weights::ggufValues, file);
    }

    /**
     * Writes {@code metadata} and {@code tensors} (F32, each tensor's values from {@code values}, in
     * GGUF element order) to {@code file} and returns its size.
     */
    public static long write(Map<String, GgufValue> metadata, List<LlamaTensor> tensors,
                             Function<LlamaTensor, float[]> values, Path file) throws IOException {
        Sink head = new Sink();
        head.u32(MAGIC).u32(VERSION).u64(tensors.size()).u64(metadata.size());
        for (Map.Entry<String, GgufValue> e : metadata.entrySet()) {
            head.str(e.getKey()).u32(e.getValue().typeCode());
            value(head, e.getValue());
        }
        long offset = 0;
        for (LlamaTensor t : tensors) {
            long[] dims = t.ggufDims();
            head.str(t.ggufName()).u32(dims.length);
            for (long d : dims) head.u64(d);
            head.u32(GGML_TYPE_F32).u64(offset);
            offset = align(offset + t.bytes());
        }
        byte[] headBytes = head.toBytes();
        long dataStart = align(headBytes.length);
        try (OutputStream out = new BufferedOutputStream(Files.newOutputStream(file), 1 << 16)) {
            out.write(headBytes);
            out.write(new byte[(int) (dataStart - headBytes.length)]);
            for (LlamaTensor t : tensors) {
                out.write(TinyLlamaWeights.littleEndian(values.apply(t)));
                out.write(new byte[(int) (align(t.bytes()) - t.bytes())]);
            }
        }
        return dataStart + offset;
    }

    static long align(long n) {
        return (n + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT;
    }

    private static void value(Sink out, GgufValue v) {
        switch (v) {
            case GgufValue.U32 u -> out.u32(u.value());
            case GgufValue.F32 f -> out.f32(f.value());
            case GgufValue.Bool b -> out.u8(b.value() ? 1 : 0);
            case GgufValue.Str s -> out.str(s.value());
            case GgufValue.StrArray a -> {
                out.u32(GgufValue.STRING).u64(a.values().size());
                for (String s : a.values()) out.str(s);
            }
            case GgufValue.F32Array a -> {
                out.u32(GgufValue.FLOAT32).u64(a.values().length);
                for (float f : a.values()) out.f32(f);
            }
            case GgufValue.I32Array a -> {
                out.u32(GgufValue.INT32).u64(a.values().length);
                for (int i : a.values()) out.u32(i);
            }
        }
    }

    /** A growable little-endian byte sink for the header. Confined to one write call. */
    private static final class Sink {
        private ByteBuffer buf = ByteBuffer.allocate(1 << 14).order(ByteOrder.LITTLE_ENDIAN);

        private Sink room(int bytes) {
            if (buf.remaining() < bytes) {
                ByteBuffer bigger = ByteBuffer.allocate(Math.max(buf.capacity() * 2, buf.position() + bytes))
                        .order(ByteOrder.LITTLE_ENDIAN);
                bigger.put(buf.flip());
                buf = bigger;
            }
            return this;
        }

        Sink u8(int v) {
            room(1).buf.put((byte) v);
            return this;
        }

        Sink u32(int v) {
            room(4).buf.putInt(v);
            return this;
        }

        Sink u64(long v) {
            room(8).buf.putLong(v);
            return this;
        }

        Sink f32(float v) {
            room(4).buf.putFloat(v);
            return this;
        }

        Sink str(String s) {
            byte[] b = s.getBytes(StandardCharsets.UTF_8);
            u64(b.length);
            room(b.length).buf.put(b);
            return this;
        }

        byte[] toBytes() {
            byte[] out = new byte[buf.position()];
            buf.get(0, out);
            return out;
        }
    }
}
