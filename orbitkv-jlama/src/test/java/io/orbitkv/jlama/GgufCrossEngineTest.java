package io.orbitkv.jlama;

import com.github.tjake.jlama.model.AbstractModel;
import de.kherud.llama.InferenceParameters;
import de.kherud.llama.LlamaModel;
import de.kherud.llama.ModelParameters;
import io.orbitkv.engine.KvPageStore;
import io.orbitkv.testmodel.ByteFallbackVocab;
import io.orbitkv.testmodel.TinyLlamaModel;
import io.orbitkv.testmodel.TinyLlamaSpec;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.Arrays;
import java.util.stream.Collectors;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The generated GGUF is a model llama.cpp loads, and it is the same model as the safetensors:
 * llama.cpp (the library bundled in de.kherud:llama) and Jlama produce the same greedy tokens.
 */
class GgufCrossEngineTest {

    @TempDir
    Path dir;

    @Test
    void llamaCppLoadsTheGgufAndAgreesWithJlamaOnGreedyTokens() throws Exception {
        TinyLlamaModel files = TinyLlamaModel.generate(TinyLlamaSpec.ci(), dir.resolve("m"));
        String text = "OrbitKV keeps KV pages.";
        int steps = 12;
        try (LlamaModel cpp = new LlamaModel(new ModelParameters().setModel(files.ggufFile().toString())
                .setCtxSize(256).setGpuLayers(0).setThreads(1).disableLog())) {
            int[] cppPrompt = cpp.encode(text);
            // SPM byte fallback: every UTF-8 byte of the (space-prefixed) text is a byte token
            assertThat(cppPrompt).isNotEmpty();
            assertThat(Arrays.stream(cppPrompt).boxed().collect(Collectors.toList())).allMatch(t -> t >= ByteFallbackVocab.FIRST_BYTE && t < ByteFallbackVocab.MIN_VOCAB);
            int[] prompt = new int[cppPrompt.length + 1];
            prompt[0] = ByteFallbackVocab.BOS;
            System.arraycopy(cppPrompt, 0, prompt, 1, cppPrompt.length);

            AbstractModel jlama = JlamaSessionRunner.loadModel(files.dir());
            int[] greedy;
            try {
                var ns = JlamaNamespace.of(files, 16);
                greedy = new JlamaSessionRunner(jlama, ns, KvPageStore.cold()).run(prompt, steps, System.nanoTime()).generated();
            } finally {
                jlama.close();
            }
            int eos = 0;
            while (eos < greedy.length && greedy[eos] != ByteFallbackVocab.EOS) eos++;
            assertThat(eos).as("Jlama produced tokens before any EOS").isGreaterThan(3);
            String expected = cpp.decode(Arrays.copyOf(greedy, eos));
            String actual = cpp.complete(new InferenceParameters(text).setTemperature(0f).setTopK(1).setNPredict(steps)
                    .setCachePrompt(false));
            assertThat(actual).as("llama.cpp greedy text vs Jlama greedy tokens " + Arrays.toString(greedy)).isEqualTo(expected);
        }
    }
}
