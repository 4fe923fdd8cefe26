package io.orbitkv.llamacpp;

import io.orbitkv.engine.KvPageStore;
import io.orbitkv.engine.ParityGateSupport;
import io.orbitkv.engine.RequestReport;
import io.orbitkv.state.Namespace;
import io.orbitkv.testmodel.TinyMambaModel;
import io.orbitkv.testmodel.TinyMambaSpec;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;

import static java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The generated Mamba on the bundled llama.cpp: it loads as a recurrent model, same seed gives the
 * same logits in another context on another copy of the file, its sequence state is the documented
 * checkpoint, a restored checkpoint continues bit for bit, and chunked prefill has the numerics of
 * a one-shot prefill (measured here, so a build where they differ shows up).
 */
class LlamaCppMambaTest {

    static final int PAGE_TOKENS = 16;

    @TempDir
    static Path dir;
    static TinyMambaModel files;
    static LlamaCppEngine engine;

    @BeforeAll
    static void load() throws IOException {
        files = TinyMambaModel.generate(TinyMambaSpec.ci(), dir.resolve("model"));
        engine = LlamaCppEngine.load(files.ggufFile(), LlamaCppEngine.Settings.deterministic(TinyMambaSpec.ci().context()));
    }

    @AfterAll
    static void close() {
        engine.close();
    }

    static int[] prompt(long seed, int length) {
        return ParityGateSupport.prompt(seed, length, TinyMambaSpec.ci().vocab());
    }

    @Test
    void sameSeedSameLogitsInAnotherContext_otherSeedOtherLogits() throws IOException {
        int[] p = prompt(1, 40);
        engine.clear();
        float[] a = engine.decode(p, 0, p.length);
        TinyMambaModel copy = TinyMambaModel.generate(TinyMambaSpec.ci(), dir.resolve("copy"));
        TinyMambaModel other = TinyMambaModel.generate(TinyMambaSpec.ci().withSeed(5), dir.resolve("other"));
        try (LlamaCppEngine b = LlamaCppEngine.load(copy.ggufFile(), LlamaCppEngine.Settings.deterministic(256));
             LlamaCppEngine c = LlamaCppEngine.load(other.ggufFile(), LlamaCppEngine.Settings.deterministic(256))) {
            assertThat(b.vocabSize()).isEqualTo(320);
            assertThat(b.layers()).isEqualTo(2);
            assertThat(b.decode(p, 0, p.length)).isEqualTo(a);
            assertThat(c.decode(p, 0, p.length)).isNotEqualTo(a);
        }
        engine.clear();
        assertThat(engine.decode(p, 0, p.length)).as("the same context again").isEqualTo(a);
    }

    @Test
    void theSequenceStateIsOneCellOfConvolutionAndSsmRows() {
        LlamaCppRecurrentLayout layout = LlamaCppRecurrentRunner.layout(engine);
        assertThat(layout).isEqualTo(new LlamaCppRecurrentLayout(2, 0, 3 * 128 * 4, 0, 16 * 128 * 4));
        assertThat(layout.checkpointBytes()).isEqualTo(19_524);
        Namespace ns = LlamaCppNamespace.ofRecurrent(files, layout, PAGE_TOKENS);
        assertThat(ns.kvLayout()).isEqualTo("llamacpp-recurrent-v1@b4916");
        assertThat(ns.dtype()).isEqualTo("f32");

        int[] p = prompt(2, 48);
        engine.clear();
        engine.decode(p, 0, 32);
        try (Arena a = Arena.ofConfined()) {
            MemorySegment state = engine.exportSequence(a);
            assertThat(layout.check(state, 32)).isEmpty();
            assertThat(layout.check(state, 48)).get().asString().contains("position 31");
            MemorySegment damaged = a.allocate(state.byteSize()).copyFrom(state);
            damaged.set(JAVA_INT_UNALIGNED, 16, 3);
            assertThat(layout.check(damaged, 32)).get().asString().contains("n_layer");
            assertThat(layout.check(state.asSlice(0, state.byteSize() - 4), 32)).get().asString().contains("bytes");
        }
    }

    @Test
    void aRestoredCheckpointContinuesBitForBit() {
        int[] p = prompt(3, 50);
        engine.clear();
        engine.decode(p, 0, 32);
        try (Arena a = Arena.ofConfined()) {
            MemorySegment at32 = engine.exportSequence(a);
            float[] straight = engine.decode(p, 32, 50);
            engine.clear();
            assertThat(engine.importSequence(at32)).isTrue();
            assertThat(engine.decode(p, 32, 50)).isEqualTo(straight);
        }
    }

    /**
     * Chunked prefill (chunks of 1, 4 and 16 pages, 16-token pages) against one batch for the
     * whole prompt, over 12 prompts of 17 to 248 tokens: every chunking whose chunks all hold at
     * least 2 tokens gives the one-shot logits bit for bit. A last chunk of 1 token (prompt 17 at
     * 1 page per chunk) takes llama.cpp's matrix-vector path and differs in the last bits, as on
     * the Llama model; the gates therefore compare with a cold control of the same chunking.
     */
    @Test
    void chunkedPrefillHasTheNumericsOfAOneShotPrefill_unlessTheLastChunkIsOneToken() {
        Namespace ns = LlamaCppNamespace.ofRecurrent(files, LlamaCppRecurrentRunner.layout(engine), PAGE_TOKENS);
        java.util.List<String> differing = new java.util.ArrayList<>();
        int oneTokenTails = 0;
        for (int i = 0; i < 12; i++) {
            int[] p = prompt(100 + i, 17 + i * 21);
            engine.clear();
            float[] oneShot = engine.decode(p, 0, p.length);
            for (int interval : new int[] {1, 4, 16}) {
                int chunk = interval * PAGE_TOKENS;
                boolean oneTokenTail = p.length > chunk && p.length % chunk == 1;
                if (oneTokenTail) {
                    oneTokenTails++;
                    continue;
                }
                RequestReport chunked = new LlamaCppRecurrentRunner(engine, ns, KvPageStore.cold(), interval).run(p, 1, System.nanoTime());
                if (!java.util.Arrays.equals(chunked.logits()[0], oneShot)) differing.add(p.length + " tokens, " + interval + " pages per chunk");
            }
        }
        assertThat(oneTokenTails).isEqualTo(1);
        assertThat(differing).as("chunkings of >= 2 tokens per chunk whose logits differ from one-shot").isEmpty();
    }
}
