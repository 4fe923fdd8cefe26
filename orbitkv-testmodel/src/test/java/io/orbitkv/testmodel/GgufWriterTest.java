package io.orbitkv.testmodel;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

class GgufWriterTest {

    @TempDir
    static Path dir;
    static TinyLlamaSpec spec = TinyLlamaSpec.ci();
    static TinyLlamaWeights weights = new TinyLlamaWeights(spec);
    static byte[] bytes;
    static GgufTestReader gguf;

    @BeforeAll
    static void write() throws Exception {
        Path file = dir.resolve("m.gguf");
        long size = GgufWriter.write(weights, file);
        bytes = Files.readAllBytes(file);
        assertThat(bytes.length).isEqualTo(size);
        gguf = new GgufTestReader(bytes);
    }

    @Test
    void headerIsGgufVersion3WithEveryTensor() {
        assertThat(new String(bytes, 0, 4, java.nio.charset.StandardCharsets.US_ASCII)).isEqualTo("GGUF");
        assertThat(gguf.magic).isEqualTo(GgufWriter.MAGIC);
        assertThat(gguf.version).isEqualTo(3);
        assertThat(gguf.tensors).hasSize(2 + 9 * spec.layers() + 1);
    }

    @Test
    void llamaHyperparametersAreThoseOfTheSpec() {
        var m = gguf.metadata;
        assertThat(m.get("general.architecture")).isEqualTo("llama");
        assertThat(m.get("general.alignment")).isEqualTo(32L);
        assertThat(m.get("llama.context_length")).isEqualTo(256L);
        assertThat(m.get("llama.embedding_length")).isEqualTo(64L);
        assertThat(m.get("llama.block_count")).isEqualTo(2L);
        assertThat(m.get("llama.feed_forward_length")).isEqualTo(128L);
        assertThat(m.get("llama.attention.head_count")).isEqualTo(4L);
        assertThat(m.get("llama.attention.head_count_kv")).isEqualTo(2L);
        assertThat(m.get("llama.rope.dimension_count")).isEqualTo(16L);
        assertThat(m.get("llama.rope.freq_base")).isEqualTo(10_000f);
        assertThat(m.get("llama.attention.layer_norm_rms_epsilon")).isEqualTo(1e-5f);
    }

    @Test
    void tokenizerIsAnSpmVocabWithByteTokens() {
        var m = gguf.metadata;
        assertThat(m.get("tokenizer.ggml.model")).isEqualTo("llama");
        List<?> tokens = (List<?>) m.get("tokenizer.ggml.tokens");
        List<?> types = (List<?>) m.get("tokenizer.ggml.token_type");
        assertThat(tokens).hasSize(spec.vocab()).doesNotHaveDuplicates();
        assertThat((List<?>) m.get("tokenizer.ggml.scores")).hasSize(spec.vocab());
        assertThat(tokens.get(1)).isEqualTo("<s>");
        assertThat(tokens.get(3 + 'A')).isEqualTo("<0x41>");
        assertThat(types.get(1)).isEqualTo(3);
        assertThat(types.get(3 + 'A')).isEqualTo(6);
        assertThat(types.get(spec.vocab() - 1)).isEqualTo(1);
        assertThat(m.get("tokenizer.ggml.bos_token_id")).isEqualTo(1L);
        assertThat(m.get("tokenizer.ggml.eos_token_id")).isEqualTo(2L);
        assertThat(m.get("tokenizer.ggml.add_bos_token")).isEqualTo(true);
    }

    @Test
    void tensorsAreAlignedF32InFastestFirstOrderAndPacked() {
        assertThat(gguf.dataStart % 32).isZero();
        long expectedOffset = 0;
        for (int i = 0; i < gguf.tensors.size(); i++) {
            var info = gguf.tensors.get(i);
            LlamaTensor t = weights.tensors().get(i);
            assertThat(info.name()).isEqualTo(t.ggufName());
            assertThat(info.type()).isEqualTo(GgufWriter.GGML_TYPE_F32);
            assertThat(info.dims()).isEqualTo(t.ggufDims());
            assertThat(info.offset()).isEqualTo(expectedOffset).matches(o -> o % 32 == 0);
            expectedOffset = GgufWriter.align(expectedOffset + t.bytes());
        }
        assertThat(bytes.length).isEqualTo(gguf.dataStart + expectedOffset);
        assertThat(gguf.tensors.get(1).name()).isEqualTo("blk.0.attn_q.weight");
        assertThat(gguf.tensors.get(2).dims()).containsExactly(64L, 32L);
    }

    @Test
    void dataIsTheSameWeightsWithQkRowsInterleaved() {
        for (int i = 0; i < weights.tensors().size(); i++) {
            LlamaTensor t = weights.tensors().get(i);
            float[] inFile = gguf.floats(gguf.tensors.get(i));
            assertThat(inFile).as(t.ggufName()).isEqualTo(weights.ggufValues(t));
            if (t.ropeHeads() == 0) assertThat(inFile).as(t.ggufName()).isEqualTo(weights.hfValues(t));
        }
        LlamaTensor q = weights.tensors().get(1);
        float[] hf = weights.hfValues(q);
        float[] gg = weights.ggufValues(q);
        int cols = q.cols();
        // head 0, head size 16: HF row 8 (first of the second half) becomes llama.cpp row 1
        assertThat(java.util.Arrays.copyOfRange(gg, cols, 2 * cols)).isEqualTo(java.util.Arrays.copyOfRange(hf, 8 * cols, 9 * cols));
        assertThat(gg).isNotEqualTo(hf);
    }
}
