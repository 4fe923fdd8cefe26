package io.orbitkv.llamacpp;

import io.orbitkv.engine.FullAttention;
import io.orbitkv.engine.HitSource;
import io.orbitkv.engine.KvPageStore;
import io.orbitkv.engine.ManagerLauncher;
import io.orbitkv.engine.OrbitKvPageStore;
import io.orbitkv.engine.ParityGateSupport;
import io.orbitkv.engine.RequestReport;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.StateKeys;
import io.orbitkv.testkit.ManagerProcess;
import io.orbitkv.testkit.ProcessTest;
import io.orbitkv.testmodel.TinyLlamaModel;
import io.orbitkv.testmodel.TinyLlamaSpec;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * Exact-parity gates of the llama.cpp adapter against a real Manager process: every warm run's
 * greedy tokens and every step's logits ({@code llama_get_logits_ith}) must equal, bit for bit,
 * those of a cold control on its own llama.cpp context that never touched OrbitKV (one thread,
 * the whole prompt in one batch). The restored token counts prove the warm path really restored
 * (through {@code llama_state_seq_set_data}); the negative controls prove that a damaged page or
 * other weights lose the hit instead of changing an output.
 */
@ProcessTest
class LlamaCppParityGateTest {

    static final int PAGE_TOKENS = 16;
    static final int NEW_TOKENS = 12;
    /** 58 prompt tokens: 3 restorable pages (48 tokens), 10 computed; 3 prompt pages published. */
    static final int PROMPT_TOKENS = 58;
    static final int CONTEXT = TinyLlamaSpec.ci().context();

    @TempDir
    static Path shared;
    static TinyLlamaModel files;
    static Namespace ns;
    static LlamaCppEngine engine;
    static LlamaCppEngine control;
    static final Map<String, RequestReport> coldResults = new HashMap<>();

    @TempDir
    Path tmp;

    @BeforeAll
    static void models() throws IOException {
        files = TinyLlamaModel.generate(TinyLlamaSpec.ci(), shared.resolve("model"));
        engine = LlamaCppEngine.load(files.ggufFile(), LlamaCppEngine.Settings.deterministic(CONTEXT));
        control = LlamaCppEngine.load(files.ggufFile(), LlamaCppEngine.Settings.deterministic(CONTEXT));
        ns = LlamaCppNamespace.of(files, LlamaCppSessionRunner.layout(engine, PAGE_TOKENS));
    }

    @AfterAll
    static void closeEngines() {
        engine.close();
        control.close();
    }

    /** BOS then {@code length - 1} pseudo-random non-special tokens of {@code seed}. */
    static int[] prompt(long seed, int length) {
        return ParityGateSupport.prompt(seed, length, TinyLlamaSpec.ci().vocab());
    }

    static RequestReport serve(KvPageStore store, LlamaCppEngine on, int[] prompt) {
        return new LlamaCppSessionRunner(on, ns, store).run(prompt, NEW_TOKENS, System.nanoTime());
    }

    static void assertParity(RequestReport warm, int[] prompt) {
        RequestReport cold = coldResults.computeIfAbsent(Arrays.toString(prompt), k -> serve(KvPageStore.cold(), control, prompt));
        assertThat(cold.restoredTokens()).isZero();
        ParityGateSupport.assertBitIdentical(warm, cold);
    }

    @Test
    void fullPrefixHitIsBitIdenticalToColdControl() throws Exception {
        int[] p = prompt(1, PROMPT_TOKENS);
        try (ManagerProcess m = ManagerLauncher.start(tmp.resolve("mgr"));
             OrbitKvPageStore store = OrbitKvPageStore.connect(m.socket(), "llamacpp-a", 1, ns)) {
            RequestReport first = serve(store, engine, p);
            assertThat(first.restoredTokens()).isZero();
            assertThat(first.source()).isEqualTo(HitSource.NONE);
            assertThat(first.published().sealed()).isEqualTo(3);
            assertParity(first, p);

            RequestReport again = serve(store, engine, p);
            assertThat(again.restoredTokens()).isEqualTo(48);
            assertThat(again.prefilledTokens()).isEqualTo(10);
            assertThat(again.restoredBytes()).isEqualTo(3 * 4096);
            assertThat(again.source()).isEqualTo(HitSource.DRAM);
            assertParity(again, p);
        }
    }

    @Test
    void partialHitAndAConversationWhoseAnswersAreRestoredOnceAPrefillComputedThem() throws Exception {
        int[] p = prompt(2, PROMPT_TOKENS);
        int[] diverging = p.clone();
        diverging[40] = diverging[40] == 100 ? 101 : 100;           // pages 0 and 1 shared, page 2 differs
        try (ManagerProcess m = ManagerLauncher.start(tmp.resolve("mgr"));
             OrbitKvPageStore store = OrbitKvPageStore.connect(m.socket(), "llamacpp-a", 1, ns)) {
            RequestReport first = serve(store, engine, p);
            RequestReport partial = serve(store, engine, diverging);
            assertThat(partial.restoredTokens()).isEqualTo(32);
            assertThat(partial.prefilledTokens()).isEqualTo(26);
            assertParity(partial, diverging);

            // turn 2: history (prompt + answer) + 12 user tokens = 82; the answer's positions were decode
            // steps, never published, so only the 3 prompt pages restore and the answer is prefilled
            int[] turn2 = next(p, first, 12, 3);
            RequestReport second = serve(store, engine, turn2);
            assertThat(second.restoredTokens()).isEqualTo(48);
            assertThat(second.published().sealed()).as("pages 3 and 4, now computed by a prefill").isEqualTo(2);
            assertParity(second, turn2);

            // turn 3 restores turn 1's answer through the pages turn 2 prefilled and published
            int[] turn3 = next(turn2, second, 12, 9);
            RequestReport third = serve(store, engine, turn3);
            assertThat(third.restoredTokens()).isEqualTo(80);
            assertParity(third, turn3);
        }
    }

    @Test
    void atLeastTwoPromptTokensAreComputed_atEveryPageBoundary() throws Exception {
        int[] p = prompt(9, 64);
        try (ManagerProcess m = ManagerLauncher.start(tmp.resolve("mgr"));
             OrbitKvPageStore store = OrbitKvPageStore.connect(m.socket(), "llamacpp-a", 1, ns)) {
            assertThat(serve(store, engine, p).published().sealed()).isEqualTo(4);
            for (int length = 47; length <= 51; length++) {
                int[] q = Arrays.copyOf(p, length);
                RequestReport r = serve(store, engine, q);
                assertThat(r.prefilledTokens()).as("prompt " + length).isGreaterThanOrEqualTo(2);
                assertThat(r.restoredTokens()).as("prompt " + length).isEqualTo(length >= 50 ? 48 : 32);
                assertParity(r, q);
            }
        }
    }

    /** The next turn: {@code history} + its answer + {@code userTokens} tokens of seed {@code seed}. */
    static int[] next(int[] history, RequestReport answer, int userTokens, long seed) {
        int[] turn = Arrays.copyOf(history, history.length + NEW_TOKENS + userTokens);
        System.arraycopy(answer.generated(), 0, turn, history.length, NEW_TOKENS);
        System.arraycopy(prompt(seed, userTokens), 0, turn, history.length + NEW_TOKENS, userTokens);
        return turn;
    }

    @Test
    void hitAfterTheEngineProcessRestarts() throws Exception {
        int[] p = prompt(4, PROMPT_TOKENS);
        try (ManagerProcess m = ManagerLauncher.start(tmp.resolve("mgr"))) {
            List<String> cmd = LlamaCppEngineProcessMain.command(m.socket().toString(), tmp.resolve("child-model").toString(),
                    "llamacpp-r", "1", "4", Integer.toString(PROMPT_TOKENS));
            Process child = new ProcessBuilder(cmd).redirectErrorStream(true).start();
            String out = new String(child.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertThat(child.waitFor(120, TimeUnit.SECONDS)).isTrue();
            assertThat(child.exitValue()).as(out).isZero();
            assertThat(out).contains("RESULT restored=0 published=3");

            try (OrbitKvPageStore restarted = OrbitKvPageStore.connect(m.socket(), "llamacpp-r", 2, ns)) {
                RequestReport r = serve(restarted, engine, p);
                assertThat(r.restoredTokens()).isEqualTo(48);
                assertParity(r, p);
            }
        }
    }

    @Test
    void restoreIntoASecondEngineInstanceSharingTheManager() throws Exception {
        int[] p = prompt(5, PROMPT_TOKENS);
        try (ManagerProcess m = ManagerLauncher.start(tmp.resolve("mgr"));
             LlamaCppEngine second = LlamaCppEngine.load(files.ggufFile(), LlamaCppEngine.Settings.deterministic(CONTEXT));
             OrbitKvPageStore a = OrbitKvPageStore.connect(m.socket(), "replica-a", 1, ns);
             OrbitKvPageStore b = OrbitKvPageStore.connect(m.socket(), "replica-b", 1, ns)) {
            assertThat(serve(a, engine, p).published().sealed()).isEqualTo(3);
            RequestReport r = serve(b, second, p);
            assertThat(r.restoredTokens()).isEqualTo(48);
            assertThat(r.source()).isEqualTo(HitSource.DRAM);
            assertParity(r, p);
        }
    }

    @SuppressWarnings("try") // the store closes before the Manager stops; the try's close is then a no-op
    @Test
    void hitAfterTheManagerRestartsIsServedFromSsd_andACorruptedPageOnDiskBecomesAMiss() throws Exception {
        int[] p = prompt(6, PROMPT_TOKENS);
        int[] q = prompt(7, PROMPT_TOKENS);
        Path dir = tmp.resolve("mgr");
        try (ManagerProcess m = ManagerLauncher.start(dir);
             OrbitKvPageStore store = OrbitKvPageStore.connect(m.socket(), "llamacpp-a", 1, ns)) {
            assertThat(serve(store, engine, p).published().sealed()).isEqualTo(3);
            assertThat(serve(store, engine, q).published().sealed()).isEqualTo(3);
            await().atMost(Duration.ofSeconds(30)).until(() -> m.metric("orbitkv_ssd_writes_total") >= 6);
            store.close();
            assertThat(m.terminate()).isZero();
        }
        StateKey damaged = StateKeys.forTokens(ns.digest(), FullAttention.GROUP, q, PAGE_TOKENS, new byte[0]).get(1);
        assertThat(ParityGateSupport.flipPayloadByte(dir.resolve("ssd"), damaged)).as("extent of page 1 found").isTrue();

        try (ManagerProcess m = ManagerLauncher.start(dir);
             OrbitKvPageStore store = OrbitKvPageStore.connect(m.socket(), "llamacpp-a", 2, ns)) {
            RequestReport fromSsd = serve(store, engine, p);
            assertThat(fromSsd.restoredTokens()).isEqualTo(48);
            assertThat(fromSsd.source()).isEqualTo(HitSource.STAGED);
            assertParity(fromSsd, p);

            RequestReport corrupted = serve(store, engine, q);
            assertThat(corrupted.restoredTokens()).as("the damaged page 1 and everything after it is a miss").isEqualTo(16);
            assertParity(corrupted, q);
        }
    }

    @Test
    void aModelWithOtherWeightsMisses() throws Exception {
        int[] p = prompt(8, PROMPT_TOKENS);
        TinyLlamaModel otherFiles = TinyLlamaModel.generate(TinyLlamaSpec.ci().withSeed(99), tmp.resolve("other"));
        try (LlamaCppEngine other = LlamaCppEngine.load(otherFiles.ggufFile(), LlamaCppEngine.Settings.deterministic(CONTEXT))) {
            Namespace otherNs = LlamaCppNamespace.of(otherFiles, LlamaCppSessionRunner.layout(other, PAGE_TOKENS));
            assertThat(otherNs.digestHex()).isNotEqualTo(ns.digestHex());
            try (ManagerProcess m = ManagerLauncher.start(tmp.resolve("mgr"));
                 OrbitKvPageStore a = OrbitKvPageStore.connect(m.socket(), "llamacpp-a", 1, ns);
                 OrbitKvPageStore o = OrbitKvPageStore.connect(m.socket(), "llamacpp-other", 1, otherNs)) {
                assertThat(serve(a, engine, p).published().sealed()).isEqualTo(3);
                RequestReport r = new LlamaCppSessionRunner(other, otherNs, o).run(p, NEW_TOKENS, System.nanoTime());
                assertThat(r.restoredTokens()).isZero();
                assertThat(r.source()).isEqualTo(HitSource.NONE);
                RequestReport otherCold = new LlamaCppSessionRunner(other, otherNs, KvPageStore.cold()).run(p, NEW_TOKENS, System.nanoTime());
                ParityGateSupport.assertBitIdentical(r, otherCold);
                assertThat(r.generated()).as("other weights, other answer").isNotEqualTo(serve(KvPageStore.cold(), control, p).generated());
            }
        }
    }
}
