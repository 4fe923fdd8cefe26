package io.orbitkv.llamacpp;

import io.orbitkv.engine.HitSource;
import io.orbitkv.engine.KvPageStore;
import io.orbitkv.engine.ManagerLauncher;
import io.orbitkv.engine.OrbitKvPageStore;
import io.orbitkv.engine.ParityGateSupport;
import io.orbitkv.engine.RequestReport;
import io.orbitkv.engine.StateLookup;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.StateKeys;
import io.orbitkv.testkit.ManagerProcess;
import io.orbitkv.testkit.ProcessTest;
import io.orbitkv.testmodel.TinyMambaModel;
import io.orbitkv.testmodel.TinyMambaSpec;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * Exact-parity gates of recurrent checkpoints on a real recurrent engine (the CI Mamba on the
 * bundled llama.cpp) against a real Manager process: every warm run's greedy tokens and every
 * step's logits must equal, bit for bit, those of a cold control on its own context that never
 * touched OrbitKV and prefills with the same chunking. The restored token counts prove the
 * checkpoint really was restored ({@code llama_state_seq_set_data}); the negative controls prove
 * that a damaged checkpoint, another model's checkpoint, or attention pages with no checkpoint at
 * the boundary lose the hit (or shorten it to a legal boundary) instead of changing an output.
 * The gates that need no restart share one Manager process.
 */
@ProcessTest
class LlamaCppRecurrentParityGateTest {

    static final int PAGE_TOKENS = 16;
    static final int NEW_TOKENS = 12;
    /** 58 prompt tokens: checkpoints at 16, 32, 48; the cap (57 rounded down) is 48, 10 tokens computed. */
    static final int PROMPT_TOKENS = 58;
    static final int CONTEXT = TinyMambaSpec.ci().context();

    @TempDir
    static Path shared;
    static TinyMambaModel files;
    static Namespace ns;
    static LlamaCppEngine engine;
    static LlamaCppEngine control;
    static ManagerProcess manager;
    static final Map<String, RequestReport> coldResults = new HashMap<>();

    @TempDir
    Path tmp;

    @BeforeAll
    static void start() throws IOException, InterruptedException {
        files = TinyMambaModel.generate(TinyMambaSpec.ci(), shared.resolve("model"));
        engine = LlamaCppEngine.load(files.ggufFile(), LlamaCppEngine.Settings.deterministic(CONTEXT));
        control = LlamaCppEngine.load(files.ggufFile(), LlamaCppEngine.Settings.deterministic(CONTEXT));
        ns = LlamaCppNamespace.ofRecurrent(files, LlamaCppRecurrentRunner.layout(engine), PAGE_TOKENS);
        manager = ManagerLauncher.start(shared.resolve("mgr"));
    }

    @AfterAll
    static void stop() {
        manager.close();
        engine.close();
        control.close();
    }

    static int[] prompt(long seed, int length) {
        return ParityGateSupport.prompt(seed, length, TinyMambaSpec.ci().vocab());
    }

    static OrbitKvPageStore connect(Path socket, String instance, long epoch) throws IOException {
        return OrbitKvPageStore.connect(socket, instance, epoch, ns, LlamaCppRecurrentRunner.contract(PAGE_TOKENS));
    }

    static RequestReport serve(KvPageStore store, LlamaCppEngine on, int[] prompt, int interval) {
        return new LlamaCppRecurrentRunner(on, ns, store, interval).run(prompt, NEW_TOKENS, System.nanoTime());
    }

    /** Compares with the cold control of the same chunking (checkpoint interval). */
    static void assertParity(RequestReport warm, int[] prompt, int interval) {
        RequestReport cold = coldResults.computeIfAbsent(interval + ":" + Arrays.toString(prompt),
                k -> serve(KvPageStore.cold(), control, prompt, interval));
        assertThat(cold.restoredTokens()).isZero();
        ParityGateSupport.assertBitIdentical(warm, cold);
    }

    @Test
    void fullHitRestoresTheLastCheckpointBelowTheLastToken_bitIdenticalToColdControl() throws Exception {
        int[] p = prompt(1, PROMPT_TOKENS);
        try (OrbitKvPageStore store = connect(manager.socket(), "mamba-full", 1)) {
            RequestReport first = serve(store, engine, p, 1);
            assertThat(first.restoredTokens()).isZero();
            assertThat(first.published().sealed()).as("checkpoints at 16, 32, 48").isEqualTo(3);
            assertParity(first, p, 1);

            RequestReport again = serve(store, engine, p, 1);
            assertThat(again.restoredTokens()).isEqualTo(48);
            assertThat(again.prefilledTokens()).isEqualTo(10);
            assertThat(again.restoredBytes()).isEqualTo(19_524);
            assertThat(again.source()).isEqualTo(HitSource.DRAM);
            assertThat(again.published().sealed()).as("nothing new: the tail ends at 58").isZero();
            assertParity(again, p, 1);
        }
    }

    @Test
    void aPromptDivergingMidPageFallsBackToTheLastCheckpointAtOrBeforeTheDivergence() throws Exception {
        int[] p = prompt(2, PROMPT_TOKENS);
        int[] at40 = p.clone();
        at40[40] = at40[40] == 100 ? 101 : 100;              // inside page 2: checkpoints 16 and 32 still match
        int[] at20 = p.clone();
        at20[20] = at20[20] == 100 ? 101 : 100;              // inside page 1: only the checkpoint at 16
        try (OrbitKvPageStore store = connect(manager.socket(), "mamba-partial", 1)) {
            assertThat(serve(store, engine, p, 1).published().sealed()).isEqualTo(3);
            RequestReport r40 = serve(store, engine, at40, 1);
            assertThat(r40.restoredTokens()).isEqualTo(32);
            assertThat(r40.published().sealed()).as("the diverged prompt's own checkpoint at 48").isEqualTo(1);
            assertParity(r40, at40, 1);
            RequestReport r20 = serve(store, engine, at20, 1);
            assertThat(r20.restoredTokens()).isEqualTo(16);
            assertParity(r20, at20, 1);

            // a longer prompt continuing p: its checkpoint at 48 is the boundary, 64 and 80 are new
            int[] longer = Arrays.copyOf(p, 90);
            System.arraycopy(prompt(12, 32), 0, longer, PROMPT_TOKENS, 32);
            RequestReport rl = serve(store, engine, longer, 1);
            assertThat(rl.restoredTokens()).isEqualTo(48);
            assertThat(rl.published().sealed()).isEqualTo(2);
            assertParity(rl, longer, 1);
        }
    }

    @Test
    void checkpointsEveryFourPages_aShorterPromptHasNoCandidateCheckpointAndMisses() throws Exception {
        int[] p = prompt(3, 140);                                // boundaries of 64 tokens: 64 and 128
        try (OrbitKvPageStore store = connect(manager.socket(), "mamba-every-4", 1)) {
            assertThat(serve(store, engine, p, 4).published().sealed()).isEqualTo(2);
            RequestReport again = serve(store, engine, p, 4);
            assertThat(again.restoredTokens()).isEqualTo(128);
            assertParity(again, p, 4);
            int[] shorter = Arrays.copyOf(p, 100);               // candidates 16..96: only 64 was checkpointed
            RequestReport r = serve(store, engine, shorter, 4);
            assertThat(r.restoredTokens()).isEqualTo(64);
            assertParity(r, shorter, 4);
            int[] tooShort = Arrays.copyOf(p, 60);               // candidates 16..48: no checkpoint at any
            RequestReport miss = serve(store, engine, tooShort, 4);
            assertThat(miss.restoredTokens()).isZero();
            assertThat(miss.source()).isEqualTo(HitSource.NONE);
            assertParity(miss, tooShort, 4);
        }
    }

    @Test
    void hitAfterTheEngineProcessRestarts() throws Exception {
        int[] p = prompt(4, PROMPT_TOKENS);
        List<String> cmd = LlamaCppRecurrentProcessMain.command(manager.socket().toString(), tmp.resolve("child-model").toString(),
                "mamba-restart", "1", "4", Integer.toString(PROMPT_TOKENS), "1");
        Process child = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(child.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(child.waitFor(120, TimeUnit.SECONDS)).isTrue();
        assertThat(child.exitValue()).as(out).isZero();
        assertThat(out).contains("RESULT restored=0 published=3");
        try (OrbitKvPageStore restarted = connect(manager.socket(), "mamba-restart", 2)) {
            RequestReport r = serve(restarted, engine, p, 1);
            assertThat(r.restoredTokens()).isEqualTo(48);
            assertParity(r, p, 1);
        }
    }

    @SuppressWarnings("try") // the store closes before the Manager stops; the try's close is then a no-op
    @Test
    void hitAfterTheManagerRestartsIsServedFromSsd_andCheckpointsFlippedOnDiskAreNeverServed() throws Exception {
        int[] p = prompt(6, PROMPT_TOKENS);
        int[] q = prompt(7, PROMPT_TOKENS);
        int[] single = prompt(8, 20);                            // one candidate boundary, 16
        Path dir = tmp.resolve("mgr");
        try (ManagerProcess m = ManagerLauncher.start(dir);
             OrbitKvPageStore store = connect(m.socket(), "mamba-ssd", 1)) {
            assertThat(serve(store, engine, p, 1).published().sealed()).isEqualTo(3);
            assertThat(serve(store, engine, q, 1).published().sealed()).isEqualTo(3);
            assertThat(serve(store, engine, single, 1).published().sealed()).isEqualTo(1);
            await().atMost(Duration.ofSeconds(30)).until(() -> m.metric("orbitkv_ssd_writes_total") >= 7);
            // 7 checkpoints retained (DRAM and SSD, each once); p's hit at 48 needed 1 of them
            assertThat(serve(store, engine, p, 1).restoredTokens()).isEqualTo(48);
            assertThat(m.status()).containsPattern("\"retainedBytes\" *: *" + 7 * 19_524 + ",\\s*\"retainedImages\" *: *7,"
                    + "\\s*\"neededBytes\" *: *19524,\\s*\"neededImages\" *: *1,\\s*\"amplification\" *: *7.0");
            assertThat(m.metric("orbitkv_retention_amplification_ratio{")).isEqualTo(7.0);
            store.close();
            assertThat(m.terminate()).isZero();
        }
        assertThat(ParityGateSupport.flipPayloadByte(dir.resolve("ssd"), checkpointKey(q, 48))).as("extent of q@48").isTrue();
        assertThat(ParityGateSupport.flipPayloadByte(dir.resolve("ssd"), checkpointKey(single, 16))).as("extent of single@16").isTrue();

        try (ManagerProcess m = ManagerLauncher.start(dir);
             OrbitKvPageStore store = connect(m.socket(), "mamba-ssd", 2)) {
            RequestReport fromSsd = serve(store, engine, p, 1);
            assertThat(fromSsd.restoredTokens()).isEqualTo(48);
            assertThat(fromSsd.source()).isEqualTo(HitSource.STAGED);
            assertParity(fromSsd, p, 1);

            RequestReport shortened = serve(store, engine, q, 1);
            assertThat(shortened.restoredTokens()).as("the flipped checkpoint at 48 is dropped; 32 is legal").isEqualTo(32);
            assertParity(shortened, q, 1);

            RequestReport miss = serve(store, engine, single, 1);
            assertThat(miss.restoredTokens()).as("the only candidate checkpoint was flipped").isZero();
            assertParity(miss, single, 1);
        }
    }

    static StateKey checkpointKey(int[] prompt, int t) {
        return StateKeys.forTokens(ns.digest(), LlamaCppRecurrentRunner.GROUP, Arrays.copyOf(prompt, t), PAGE_TOKENS, new byte[0])
                .get(t / PAGE_TOKENS - 1);
    }

    @Test
    void aCheckpointOfAnotherModelMisses() throws Exception {
        int[] p = prompt(9, PROMPT_TOKENS);
        TinyMambaModel otherFiles = TinyMambaModel.generate(TinyMambaSpec.ci().withSeed(99), tmp.resolve("other"));
        try (LlamaCppEngine other = LlamaCppEngine.load(otherFiles.ggufFile(), LlamaCppEngine.Settings.deterministic(CONTEXT))) {
            Namespace otherNs = LlamaCppNamespace.ofRecurrent(otherFiles, LlamaCppRecurrentRunner.layout(other), PAGE_TOKENS);
            assertThat(otherNs.digestHex()).isNotEqualTo(ns.digestHex());
            try (OrbitKvPageStore a = connect(manager.socket(), "mamba-a", 1);
                 OrbitKvPageStore o = OrbitKvPageStore.connect(manager.socket(), "mamba-other", 1, otherNs,
                         LlamaCppRecurrentRunner.contract(PAGE_TOKENS))) {
                assertThat(serve(a, engine, p, 1).published().sealed()).isEqualTo(3);
                RequestReport r = new LlamaCppRecurrentRunner(other, otherNs, o, 1).run(p, NEW_TOKENS, System.nanoTime());
                assertThat(r.restoredTokens()).isZero();
                assertThat(r.source()).isEqualTo(HitSource.NONE);
                RequestReport otherCold = new LlamaCppRecurrentRunner(other, otherNs, KvPageStore.cold(), 1).run(p, NEW_TOKENS, System.nanoTime());
                ParityGateSupport.assertBitIdentical(r, otherCold);
                assertThat(r.generated()).as("other weights, other answer").isNotEqualTo(serve(KvPageStore.cold(), control, p, 1).generated());
            }
        }
    }

    /**
     * A hybrid contract (full attention + recurrent) on the same Manager: attention pages alone,
     * with no checkpoint at any candidate boundary, are never a hit; with a checkpoint only at 16,
     * the boundary is 16 (a shorter legal boundary), and the hit carries the pages and the
     * checkpoint together. No hybrid runs on this llama.cpp build, so the images are marked bytes.
     */
    @Test
    void attentionPagesWithoutACheckpointAtTheBoundaryAreNeverAHit() throws Exception {
        RecoveryContract hybrid = new RecoveryContract(PAGE_TOKENS, List.of(new StateGroup.Full(0), new StateGroup.Recurrent(1)));
        Namespace hns = new Namespace("hybrid-probe", "r1", "w", "t", "", "f32", "hybrid-marked-bytes", PAGE_TOKENS, 1, 0, 1, 0, 1);
        int[] p = prompt(10, 70);                                   // cap 64: candidates 16..64
        List<StateKey> pages = StateKeys.forTokens(hns.digest(), 0, Arrays.copyOf(p, 64), PAGE_TOKENS, new byte[0]);
        List<StateKey> checkpoints = StateKeys.forTokens(hns.digest(), 1, Arrays.copyOf(p, 64), PAGE_TOKENS, new byte[0]);
        Map<Integer, List<StateKey>> keys = Map.of(0, pages, 1, checkpoints);
        try (OrbitKvPageStore store = OrbitKvPageStore.connect(manager.socket(), "hybrid", 1, hns, hybrid)) {
            assertThat(store.publish(0, pages, 512, (i, slot) -> slot.fill((byte) (i + 1))).sealed()).isEqualTo(4);
            assertThat(store.lookupBoundary(keys, p.length)).as("attention pages alone").isInstanceOf(StateLookup.Miss.class);

            assertThat(store.publish(1, checkpoints.subList(0, 1), 256, (i, slot) -> slot.fill((byte) 0x7C)).sealed()).isEqualTo(1);
            StateLookup lookup = store.lookupBoundary(keys, p.length);
            assertThat(lookup).isInstanceOf(StateLookup.Hit.class);
            try (StateLookup.Hit hit = (StateLookup.Hit) lookup) {
                assertThat(hit.boundaryTokens()).as("the checkpoint decides, not the 4 attention pages").isEqualTo(16);
                assertThat(hit.group(0)).hasSize(1);
                assertThat(hit.group(0).getFirst().get(JAVA_BYTE, 0)).isEqualTo((byte) 1);
                assertThat(hit.group(1)).hasSize(1);
                MemorySegment checkpoint = hit.group(1).getFirst();
                assertThat(checkpoint.byteSize()).isEqualTo(256);
                assertThat(checkpoint.get(JAVA_BYTE, 255)).isEqualTo((byte) 0x7C);
            }
        }
    }
}
