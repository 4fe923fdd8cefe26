package io.orbitkv.testmodel;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The Mamba generator: reproducible bytes, llama.cpp's Mamba keys, names and shapes, a stable scan. */
class TinyMambaModelTest {

    @TempDir
    Path dir;

    @Test
    void sameSeedWritesIdenticalBytes_anotherSeedOtherWeightsSameVocab() throws Exception {
        TinyMambaModel a = TinyMambaModel.generate(TinyMambaSpec.ci(), dir.resolve("a"));
        TinyMambaModel b = TinyMambaModel.generate(TinyMambaSpec.ci(), dir.resolve("b"));
        TinyMambaModel c = TinyMambaModel.generate(TinyMambaSpec.ci().withSeed(7), dir.resolve("c"));
        assertThat(Files.readAllBytes(a.ggufFile())).isEqualTo(Files.readAllBytes(b.ggufFile()));
        assertThat(a.weightsDigestHex()).isEqualTo(b.weightsDigestHex()).hasSize(64);
        assertThat(c.weightsDigestHex()).isNotEqualTo(a.weightsDigestHex());
        assertThat(c.tokenizerDigestHex()).isEqualTo(a.tokenizerDigestHex());
        assertThat(Files.readAllBytes(c.ggufFile())).isNotEqualTo(Files.readAllBytes(a.ggufFile()));
    }

    @Test
    void metadataAndTensorsAreLlamaCppsMambaLayout() throws Exception {
        TinyMambaSpec s = TinyMambaSpec.ci();
        TinyMambaModel m = TinyMambaModel.generate(s, dir.resolve("m"));
        GgufTestReader gguf = new GgufTestReader(Files.readAllBytes(m.ggufFile()));
        assertThat(gguf.metadata.get("general.architecture")).isEqualTo("mamba");
        assertThat(gguf.metadata.get("mamba.ssm.conv_kernel")).isEqualTo((long) s.convKernel());
        assertThat(gguf.metadata.get("mamba.ssm.inner_size")).isEqualTo((long) s.inner());
        assertThat(gguf.metadata.get("mamba.ssm.state_size")).isEqualTo((long) s.stateSize());
        assertThat(gguf.metadata.get("mamba.ssm.time_step_rank")).isEqualTo((long) s.timeStepRank());
        assertThat(gguf.metadata.get("mamba.attention.head_count")).isEqualTo(0L);
        assertThat((List<?>) gguf.metadata.get("tokenizer.ggml.tokens")).hasSize(s.vocab());

        assertThat(gguf.tensors).hasSize(3 + 10 * s.layers());
        var byName = new java.util.HashMap<String, GgufTestReader.TensorInfo>();
        for (var t : gguf.tensors) byName.put(t.name(), t);
        assertThat(byName.get("token_embd.weight").dims()).containsExactly(64L, 320L);
        assertThat(byName.get("blk.1.ssm_in.weight").dims()).containsExactly(64L, 256L);
        assertThat(byName.get("blk.1.ssm_conv1d.weight").dims()).containsExactly(4L, 128L);
        assertThat(byName.get("blk.1.ssm_x.weight").dims()).containsExactly(128L, 4L + 2 * 16);
        assertThat(byName.get("blk.1.ssm_dt.weight").dims()).containsExactly(4L, 128L);
        assertThat(byName.get("blk.1.ssm_a").dims()).containsExactly(16L, 128L);
        assertThat(byName.get("blk.1.ssm_d").dims()).containsExactly(128L);
        assertThat(byName.get("blk.1.ssm_out.weight").dims()).containsExactly(128L, 64L);

        TinyMambaWeights w = new TinyMambaWeights(s);
        for (int i = 0; i < w.tensors().size(); i++) {
            assertThat(gguf.floats(gguf.tensors.get(i))).as(w.tensors().get(i).ggufName()).isEqualTo(w.values(w.tensors().get(i)));
        }
    }

    @Test
    void theScanIsStable_everyDecayBelowOne() {
        TinyMambaWeights w = new TinyMambaWeights(TinyMambaSpec.ci());
        for (LlamaTensor t : w.tensors()) {
            float[] v = w.values(t);
            if (t.ggufName().endsWith(".ssm_a")) {
                for (float a : v) assertThat(a).isLessThanOrEqualTo(-1f);
            }
            if (t.ggufName().endsWith(".ssm_dt.bias")) {
                for (float b : v) {
                    double dt = Math.log1p(Math.exp(b));
                    assertThat(dt).isBetween(0.00099, 0.1001);
                }
            }
        }
    }

    @Test
    void badSpecsAreRefused() {
        assertThatThrownBy(() -> new TinyMambaSpec("m", 1, 8, 16, 4, 1, 1, 320, 16, 1)).hasMessageContaining("convKernel");
        assertThatThrownBy(() -> new TinyMambaSpec("m", 1, 8, 16, 4, 4, 1, 100, 16, 1)).hasMessageContaining("vocab");
        assertThatThrownBy(() -> new TinyMambaSpec(" ", 1, 8, 16, 4, 4, 1, 320, 16, 1)).hasMessageContaining("name");
    }
}
