package io.orbitkv.llamacpp;

import io.orbitkv.testmodel.TinyLlamaModel;
import io.orbitkv.testmodel.TinyLlamaSpec;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Two llama.cpp engines in one JVM, each on its own thread, decoding at the same moments: every
 * logit of every run equals, bit for bit, what a lone engine computed for the same prompt (the
 * cold control). Without the process-wide library lock most concurrent runs computed other
 * logits, which a runner would have published as valid KV pages.
 */
class LlamaCppConcurrencyTest {

    static final int ROUNDS = 40;
    static final int STEPS = 4;

    @TempDir
    Path dir;

    @Test
    void twoEnginesDecodingAtOnceInOneJvmMatchALoneEngineBitForBit() throws Exception {
        TinyLlamaSpec spec = TinyLlamaSpec.ci();
        TinyLlamaModel files = TinyLlamaModel.generate(spec, dir.resolve("model"));
        int[][] prompts = {prompt(spec, 1, 40), prompt(spec, 2, 56)};
        List<List<int[]>> control = new ArrayList<>();
        try (LlamaCppEngine alone = LlamaCppEngine.load(files.ggufFile(), LlamaCppEngine.Settings.deterministic(spec.context()))) {
            for (int[] p : prompts) control.add(run(alone, p));
        }
        CyclicBarrier together = new CyclicBarrier(2);
        ExecutorService threads = Executors.newFixedThreadPool(2);
        try {
            List<Future<Integer>> wrong = new ArrayList<>();
            for (int e = 0; e < 2; e++) {
                int which = e;
                wrong.add(threads.submit(() -> {
                    int mismatches = 0;
                    try (LlamaCppEngine engine = LlamaCppEngine.load(files.ggufFile(),
                            LlamaCppEngine.Settings.deterministic(spec.context()))) {
                        for (int r = 0; r < ROUNDS; r++) {
                            together.await(30, TimeUnit.SECONDS);
                            List<int[]> bits = run(engine, prompts[which]);
                            for (int s = 0; s < bits.size(); s++) {
                                if (!java.util.Arrays.equals(bits.get(s), control.get(which).get(s))) mismatches++;
                            }
                        }
                    }
                    return mismatches;
                }));
            }
            for (int e = 0; e < 2; e++) {
                assertThat(wrong.get(e).get(5, TimeUnit.MINUTES)).as("steps of engine %d with other logits than the lone engine", e)
                        .isZero();
            }
        } finally {
            threads.shutdownNow();
        }
    }

    /** A fresh sequence: the prompt in one batch, then {@link #STEPS} greedy one-token steps; each step's logits as raw bits. */
    static List<int[]> run(LlamaCppEngine engine, int[] prompt) {
        engine.clear();
        List<int[]> out = new ArrayList<>();
        float[] logits = engine.decode(prompt, 0, prompt.length);
        for (int s = 0; s < STEPS; s++) {
            out.add(bits(logits));
            logits = engine.decode(new int[] {argmax(logits)}, 0, 1);
        }
        out.add(bits(logits));
        return out;
    }

    static int[] prompt(TinyLlamaSpec spec, int seed, int length) {
        int[] p = new int[length];
        java.util.SplittableRandom random = new java.util.SplittableRandom(seed);
        for (int i = 0; i < length; i++) p[i] = 1 + random.nextInt(spec.vocab() - 1);
        return p;
    }

    static int[] bits(float[] logits) {
        int[] out = new int[logits.length];
        for (int i = 0; i < logits.length; i++) out[i] = Float.floatToRawIntBits(logits[i]);
        return out;
    }

    static int argmax(float[] logits) {
        int best = 0;
        for (int i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
        return best;
    }
}
