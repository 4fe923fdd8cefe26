package io.orbitkv.testmodel;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class TinyLlamaModelTest {

    static final List<String> FILES = List.of(TinyLlamaModel.CONFIG, TinyLlamaModel.SAFETENSORS,
            TinyLlamaModel.TOKENIZER, TinyLlamaModel.TOKENIZER_CONFIG, TinyLlamaModel.GGUF);

    @TempDir
    Path dir;

    @Test
    void sameSeedWritesIdenticalBytesInEveryFile() throws Exception {
        TinyLlamaModel a = TinyLlamaModel.generate(TinyLlamaSpec.ci(), dir.resolve("a"));
        TinyLlamaModel b = TinyLlamaModel.generate(TinyLlamaSpec.ci(), dir.resolve("b"));
        for (String f : FILES) {
            assertThat(Files.readAllBytes(a.dir().resolve(f))).as(f).isEqualTo(Files.readAllBytes(b.dir().resolve(f)));
        }
        assertThat(a.weightsDigestHex()).isEqualTo(b.weightsDigestHex()).hasSize(64);
        assertThat(a.tokenizerDigestHex()).isEqualTo(b.tokenizerDigestHex());
    }

    @Test
    void anotherSeedChangesWeightsAndDigestButNotTokenizer() throws Exception {
        TinyLlamaModel a = TinyLlamaModel.generate(TinyLlamaSpec.ci(), dir.resolve("a"));
        TinyLlamaModel c = TinyLlamaModel.generate(TinyLlamaSpec.ci().withSeed(7), dir.resolve("c"));
        assertThat(c.weightsDigestHex()).isNotEqualTo(a.weightsDigestHex());
        assertThat(c.tokenizerDigestHex()).isEqualTo(a.tokenizerDigestHex());
        assertThat(Files.readAllBytes(c.dir().resolve(TinyLlamaModel.SAFETENSORS)))
                .isNotEqualTo(Files.readAllBytes(a.dir().resolve(TinyLlamaModel.SAFETENSORS)));
    }

    @Test
    void digestCoversEveryTensorValue() {
        TinyLlamaWeights w = new TinyLlamaWeights(TinyLlamaSpec.ci());
        String digest = w.digestHex();
        assertThat(new TinyLlamaWeights(TinyLlamaSpec.ci()).digestHex()).isEqualTo(digest);
        assertThat(new TinyLlamaWeights(TinyLlamaSpec.ci().withSeed(TinyLlamaSpec.ci().seed() + 1)).digestHex())
                .isNotEqualTo(digest);
    }

    @Test
    void safetensorsHeaderIsAlignedAndDataReadsBack() throws Exception {
        TinyLlamaModel m = TinyLlamaModel.generate(TinyLlamaSpec.ci(), dir.resolve("m"));
        TinyLlamaWeights w = new TinyLlamaWeights(m.spec());
        byte[] file = Files.readAllBytes(m.dir().resolve(TinyLlamaModel.SAFETENSORS));
        ByteBuffer in = ByteBuffer.wrap(file).order(ByteOrder.LITTLE_ENDIAN);
        long headerBytes = in.getLong();
        assertThat(headerBytes % 8).isZero();
        String header = new String(file, 8, (int) headerBytes, StandardCharsets.UTF_8);
        assertThat(header).startsWith("{\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[320,64],\"data_offsets\":[0,81920]}")
                .contains("\"model.layers.1.self_attn.k_proj.weight\":{\"dtype\":\"F32\",\"shape\":[32,64]")
                .contains("\"model.norm.weight\":{\"dtype\":\"F32\",\"shape\":[64]");
        assertThat(file.length).isEqualTo(8 + headerBytes + w.totalBytes());
        LlamaTensor lmHead = w.tensors().getLast();
        float[] back = new float[(int) lmHead.elements()];
        ByteBuffer.wrap(file, (int) (file.length - lmHead.bytes()), (int) lmHead.bytes()).order(ByteOrder.LITTLE_ENDIAN)
                .asFloatBuffer().get(back);
        assertThat(back).isEqualTo(w.hfValues(lmHead));
    }

    @Test
    void configAndTokenizerCarryTheSpec() throws Exception {
        TinyLlamaModel m = TinyLlamaModel.generate(TinyLlamaSpec.ci(), dir.resolve("m"));
        String config = Files.readString(m.dir().resolve(TinyLlamaModel.CONFIG));
        assertThat(config).contains("\"num_key_value_heads\": 2", "\"num_hidden_layers\": 2", "\"vocab_size\": 320",
                "\"max_position_embeddings\": 256", "\"model_type\": \"llama\"");
        String tokenizer = Files.readString(m.dir().resolve(TinyLlamaModel.TOKENIZER));
        assertThat(tokenizer).contains("\"byte_fallback\": true", "\"<0xFF>\": 258", "\"<extra_319>\": 319");
    }

    @Test
    void presetsHaveTheAgreedShapes() {
        TinyLlamaSpec ci = TinyLlamaSpec.ci();
        assertThat(ci.kvWidth()).isEqualTo(32);
        TinyLlamaSpec bench = TinyLlamaSpec.bench();
        assertThat(bench.layers()).isEqualTo(8);
        assertThat(bench.hidden()).isEqualTo(512);
        assertThat(bench.context()).isEqualTo(4096);
        assertThat(bench.heads()).isGreaterThan(bench.kvHeads());
    }

    @Test
    void invalidShapesAreRefused() {
        assertThatThrownBy(() -> new TinyLlamaSpec("x", 2, 64, 4, 3, 128, 320, 256, 1)).hasMessageContaining("kvHeads");
        assertThatThrownBy(() -> new TinyLlamaSpec("x", 2, 64, 4, 2, 128, 100, 256, 1)).hasMessageContaining("vocab");
        assertThatThrownBy(() -> new TinyLlamaSpec("x", 2, 60, 4, 2, 128, 320, 256, 1)).hasMessageContaining("even");
    }

    @Test
    void encodeMapsUtf8BytesAfterBos() {
        assertThat(ByteFallbackVocab.encode("Hé")).containsExactly(1, 3 + 'H', 3 + 0xC3, 3 + 0xA9);
        assertThat(ByteFallbackVocab.encodeContinuation("A")).containsExactly(3 + 'A');
    }
}
