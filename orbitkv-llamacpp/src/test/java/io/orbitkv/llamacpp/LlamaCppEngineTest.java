package io.orbitkv.llamacpp;

import io.orbitkv.engine.KvPageStore;
import io.orbitkv.engine.ParityGateSupport;
import io.orbitkv.engine.RequestReport;
import io.orbitkv.state.Namespace;
import io.orbitkv.testmodel.TinyLlamaModel;
import io.orbitkv.testmodel.TinyLlamaSpec;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The bindings on the real bundled library and the CI model: the startup check, reproducible
 * cold runs (the premise of every parity gate), the sequence-state carving against llama.cpp's
 * own bytes, and a restore through an in-memory store.
 */
class LlamaCppEngineTest {

    static final int PAGE_TOKENS = 16;

    @TempDir
    static Path dir;
    static TinyLlamaModel files;
    static LlamaCppEngine engine;

    @BeforeAll
    static void load() throws IOException {
        files = TinyLlamaModel.generate(TinyLlamaSpec.ci(), dir.resolve("model"));
        engine = LlamaCppEngine.load(files.ggufFile(), LlamaCppEngine.Settings.deterministic(TinyLlamaSpec.ci().context()));
    }

    @AfterAll
    static void close() {
        engine.close();
    }

    @Test
    void theBundledLibraryPassesTheStartupCheck() {
        assertThat(LlamaCppNative.get().systemInfo()).contains("CPU");
        assertThat(engine.vocabSize()).isEqualTo(TinyLlamaSpec.ci().vocab());
        assertThat(engine.layers()).isEqualTo(TinyLlamaSpec.ci().layers());
        assertThat(LlamaCppAbi.MODEL_PARAMS.byteSize()).isEqualTo(64);
        assertThat(LlamaCppAbi.CONTEXT_PARAMS.byteSize()).isEqualTo(120);
        assertThat(LlamaCppAbi.BATCH.byteSize()).isEqualTo(56);
        assertThat(LlamaCppAbi.offset(LlamaCppAbi.CONTEXT_PARAMS, "type_k")).isEqualTo(88);
        assertThat(LlamaCppAbi.offset(LlamaCppAbi.CONTEXT_PARAMS, "abort_callback")).isEqualTo(104);
        assertThat(LlamaCppAbi.offset(LlamaCppAbi.MODEL_PARAMS, "use_mmap")).isEqualTo(57);
    }

    @Test
    void theNamespaceBindsTheLayoutTheBuildAndTheWeights() throws IOException {
        Namespace ns = LlamaCppNamespace.of(files, LlamaCppSessionRunner.layout(engine, PAGE_TOKENS));
        assertThat(ns.kvLayout()).isEqualTo("llamacpp-seqstate-v1@b4916/v-transposed");
        assertThat(ns.dtype()).isEqualTo("f16");
        assertThat(ns.pageTokens()).isEqualTo(PAGE_TOKENS);
        assertThat(ns.weightsDigest()).isEqualTo(files.weightsDigestHex());
        TinyLlamaModel other = TinyLlamaModel.generate(TinyLlamaSpec.ci().withSeed(7), dir.resolve("other"));
        Namespace otherNs = LlamaCppNamespace.of(other, LlamaCppSessionRunner.layout(engine, PAGE_TOKENS));
        assertThat(otherNs.digestHex()).isNotEqualTo(ns.digestHex());
        LlamaCppKvPageLayout rows = new LlamaCppKvPageLayout(2, 1, 64, 1, false, 2, 32, PAGE_TOKENS);
        assertThat(LlamaCppNamespace.of(files, rows).digestHex()).as("another V order, another namespace").isNotEqualTo(ns.digestHex());
    }

    @Test
    void theStartupCheckNamesWhatMismatched() throws Throwable {
        LlamaCppNative lib = LlamaCppNative.get();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment mp = (MemorySegment) lib.modelDefaultParams.invokeExact((SegmentAllocator) a);
            MemorySegment cp = (MemorySegment) lib.contextDefaultParams.invokeExact((SegmentAllocator) a);
            assertThat(LlamaCppAbi.mismatches(LlamaCppAbi.BUILD_NUMBER, LlamaCppAbi.COMMIT, mp, cp)).isEmpty();

            // a build whose context params had one more leading field would show type_v where type_k is read
            LlamaCppAbi.setContextInt(cp, "type_k", LlamaCppAbi.GGML_TYPE_F32);
            mp.set(JAVA_BYTE, 57, (byte) 0);
            assertThat(LlamaCppAbi.mismatches(4917, "deadbeef", mp, cp)).containsExactly(
                    "LLAMA_BUILD_NUMBER: expected 4916, found 4917",
                    "LLAMA_COMMIT: expected c6af2161, found deadbeef",
                    "llama_model_params.use_mmap (offset 57): expected true, found false",
                    "llama_context_params.type_k (offset 88): expected 1, found 0");
        }
    }

    @Test
    void coldRunsAreReproducible_inOneContextAndInASecondOne() {
        int[] p = LlamaCppParityGateTest.prompt(11, 58);
        Namespace ns = LlamaCppNamespace.of(files, LlamaCppSessionRunner.layout(engine, PAGE_TOKENS));
        RequestReport a = new LlamaCppSessionRunner(engine, ns, KvPageStore.cold()).run(p, 8, System.nanoTime());
        RequestReport b = new LlamaCppSessionRunner(engine, ns, KvPageStore.cold()).run(p, 8, System.nanoTime());
        ParityGateSupport.assertBitIdentical(b, a);
        try (LlamaCppEngine second = LlamaCppEngine.load(files.ggufFile(), LlamaCppEngine.Settings.deterministic(256))) {
            RequestReport c = new LlamaCppSessionRunner(second, ns, KvPageStore.cold()).run(p, 8, System.nanoTime());
            ParityGateSupport.assertBitIdentical(c, a);
        }
    }

    @Test
    void pagesCarvedFromLlamaCppsStateReassembleToTheSameBytes() {
        int[] p = LlamaCppParityGateTest.prompt(12, 48);
        engine.clear();
        engine.decode(p, 0, p.length);
        try (Arena a = Arena.ofConfined()) {
            MemorySegment state = engine.exportSequence(a);
            LlamaCppKvPageLayout layout = LlamaCppKvPageLayout.of(state, PAGE_TOKENS);
            assertThat(layout.vTrans()).isTrue();
            assertThat(layout.kType()).isEqualTo(LlamaCppAbi.GGML_TYPE_F16);
            assertThat(layout.kRowBytes()).isEqualTo(2 * 16 * 2);           // 2 kv heads x 16 dims x F16
            assertThat(layout.pageBytes()).isEqualTo(4096);
            assertThat(state.byteSize()).isEqualTo(layout.blobBytes(48));
            List<MemorySegment> pages = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                MemorySegment image = a.allocate(layout.pageBytes());
                layout.exportPage(state, i, image);
                pages.add(image);
            }
            MemorySegment rebuilt = layout.assemble(pages, a);
            assertThat(rebuilt.mismatch(state)).isEqualTo(-1);

            // a 32-position prefix restores and is what llama.cpp exports for those positions
            MemorySegment prefix = layout.assemble(pages.subList(0, 2), a);
            assertThat(engine.importSequence(prefix)).isTrue();
            assertThat(engine.exportSequence(a).mismatch(prefix)).isEqualTo(-1);
        }
    }

    /**
     * Why the runner computes at least two prompt tokens and publishes no decode-step positions:
     * in this build a one-token batch rounds differently from a larger batch, while any split into
     * batches of two or more tokens is bit-identical to one batch.
     */
    @Test
    void aOneTokenBatchComputesOtherBitsThanALargerBatch() {
        int[] p = LlamaCppParityGateTest.prompt(3, 71);
        engine.clear();
        float[] oneBatch = engine.decode(p, 0, 71);
        try (Arena a = Arena.ofConfined()) {
            MemorySegment batched = engine.exportSequence(a);
            for (int cut = 2; cut <= 69; cut += 67) {
                engine.clear();
                engine.decode(p, 0, cut);
                assertThat(engine.decode(p, cut, 71)).as("split at " + cut).isEqualTo(oneBatch);
                assertThat(engine.exportSequence(a).mismatch(batched)).as("split at " + cut).isEqualTo(-1);
            }
            engine.clear();
            engine.decode(p, 0, 70);
            assertThat(engine.decode(p, 70, 71)).as("last token alone").isNotEqualTo(oneBatch);

            engine.clear();
            engine.decode(p, 0, 62);
            for (int i = 62; i < 71; i++) engine.decode(p, i, i + 1);
            assertThat(engine.exportSequence(a).mismatch(batched)).as("K/V of nine decode steps").isNotEqualTo(-1);
        }
    }

    @Test
    void aBlobLlamaCppRefusesLeavesAnEmptySequence() {
        engine.clear();
        engine.decode(LlamaCppParityGateTest.prompt(13, 20), 0, 20);
        try (Arena a = Arena.ofConfined()) {
            MemorySegment state = engine.exportSequence(a);
            LlamaCppKvPageLayout layout = LlamaCppKvPageLayout.of(state, PAGE_TOKENS);
            MemorySegment wrongLayers = a.allocate(state.byteSize());
            MemorySegment.copy(state, 0, wrongLayers, 0, state.byteSize());
            wrongLayers.set(java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED, 4 + 8L * 20 + 4, 3);   // n_layer 3
            assertThat(engine.importSequence(wrongLayers)).isFalse();
            assertThat(engine.recentLog()).contains("mismatched layer count");
            assertThat(LlamaCppKvPageLayout.cells(engine.exportSequence(a))).isZero();
            assertThatThrownBy(() -> layout.exportPage(state, 1, a.allocate(layout.pageBytes())))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("not complete");
        }
    }
}
