package io.orbitkv.jlama;

import io.orbitkv.engine.HitSource;
import io.orbitkv.engine.KvPageStore;
import io.orbitkv.engine.ManagerLauncher;
import io.orbitkv.engine.OrbitKvPageStore;
import io.orbitkv.engine.ParityGateSupport;
import io.orbitkv.engine.RequestReport;
import com.github.tjake.jlama.model.AbstractModel;
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
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * Exact-parity gates of the Jlama adapter against a real Manager process: every warm run's
 * greedy tokens and every step's logits must equal, bit for bit, those of a cold control runner
 * on its own model instance that never touched OrbitKV. The restored token counts prove the
 * warm path really restored; the negative controls prove that a damaged page or other weights
 * lose the hit instead of changing an output.
 */
@ProcessTest
class ParityGateTest {

    static final int PAGE_TOKENS = 16;
    static final int NEW_TOKENS = 12;
    /** 58 prompt tokens: 3 restorable pages (48 tokens), 10 computed. */
    static final int PROMPT_TOKENS = 58;

    @TempDir
    static Path shared;
    static TinyLlamaModel files;
    static Namespace ns;
    static AbstractModel engineModel;
    static AbstractModel controlModel;
    static ColdControl control;

    @TempDir
    Path tmp;

    @BeforeAll
    static void models() throws IOException {
        files = TinyLlamaModel.generate(TinyLlamaSpec.ci(), shared.resolve("model"));
        ns = JlamaNamespace.of(files, PAGE_TOKENS);
        engineModel = JlamaSessionRunner.loadModel(files.dir());
        controlModel = JlamaSessionRunner.loadModel(files.dir());
        control = new ColdControl(controlModel, ns, NEW_TOKENS);
    }

    @AfterAll
    static void closeModels() {
        engineModel.close();
        controlModel.close();
    }

    /** BOS then {@code length - 1} pseudo-random non-special tokens of {@code seed}. */
    static int[] prompt(long seed, int length) {
        return ParityGateSupport.prompt(seed, length, TinyLlamaSpec.ci().vocab());
    }

    static RequestReport cold(int[] prompt) {
        return control.result(prompt);
    }

    static void assertParity(RequestReport warm, int[] prompt) {
        control.assertParity(warm, prompt);
    }

    static RequestReport serve(OrbitKvPageStore store, AbstractModel model, int[] prompt) {
        return new JlamaSessionRunner(model, ns, store).run(prompt, NEW_TOKENS, System.nanoTime());
    }

    @Test
    void fullPrefixHitIsBitIdenticalToColdControl() throws Exception {
        int[] p = prompt(1, PROMPT_TOKENS);
        try (ManagerProcess m = ManagerLauncher.start(tmp.resolve("mgr"));
             OrbitKvPageStore store = OrbitKvPageStore.connect(m.socket(), "engine-a", 1, ns)) {
            RequestReport first = serve(store, engineModel, p);
            assertThat(first.restoredTokens()).isZero();
            assertThat(first.source()).isEqualTo(HitSource.NONE);
            assertThat(first.published().sealed()).isEqualTo((PROMPT_TOKENS + NEW_TOKENS - 1) / PAGE_TOKENS);
            assertParity(first, p);
            assertThat(store.prefillRate()).as("the cold prefill's measured rate goes out with later QUERYs").isPositive();

            RequestReport again = serve(store, engineModel, p);
            assertThat(again.restoredTokens()).isEqualTo(48);
            assertThat(again.prefilledTokens()).isEqualTo(10);
            assertThat(again.restoredBytes()).isEqualTo(3 * new JlamaKvPageLayout(2, 32, PAGE_TOKENS).pageBytes());
            assertThat(again.source()).isEqualTo(HitSource.DRAM);
            assertParity(again, p);
            assertThat(store.stats()).as("every lease released, no operation left live")
                    .containsEntry("leases", 0L).containsEntry("operations", 0L);
        }
    }

    @Test
    void aQueryTheManagerRefusesBusyIsAMissAndTheRequestComputesAsCold() throws Exception {
        int[] p = prompt(7, PROMPT_TOKENS);
        long pageBytes = new JlamaKvPageLayout(2, 32, PAGE_TOKENS).pageBytes();
        try (ManagerProcess m = ManagerLauncher.start(tmp.resolve("mgr"), pageBytes, List.of("--set", "maxLeases=2"));
             OrbitKvPageStore store = OrbitKvPageStore.connect(m.socket(), "engine-a", 1, ns)) {
            assertThat(serve(store, engineModel, p).published().sealed()).isEqualTo(4);
            RequestReport refused = serve(store, engineModel, p);
            assertThat(refused.restoredTokens()).as("3 pages need 3 leases of 2: the QUERY is BUSY").isZero();
            assertThat(refused.source()).isEqualTo(HitSource.NONE);
            assertParity(refused, p);

            int[] twoPages = Arrays.copyOf(p, 2 * PAGE_TOKENS + 1);
            RequestReport hit = serve(store, engineModel, twoPages);
            assertThat(hit.restoredTokens()).as("2 pages fit the lease table").isEqualTo(2 * PAGE_TOKENS);
            assertParity(hit, twoPages);
            assertThat(store.stats()).containsEntry("leases", 0L).containsEntry("operations", 0L);
        }
    }

    @Test
    void partialHitAndAConversationThatRestoresDecodedPages() throws Exception {
        int[] p = prompt(2, PROMPT_TOKENS);
        int[] diverging = p.clone();
        diverging[40] = diverging[40] == 100 ? 101 : 100;           // pages 0 and 1 shared, page 2 differs
        try (ManagerProcess m = ManagerLauncher.start(tmp.resolve("mgr"));
             OrbitKvPageStore store = OrbitKvPageStore.connect(m.socket(), "engine-a", 1, ns)) {
            RequestReport first = serve(store, engineModel, p);
            RequestReport partial = serve(store, engineModel, diverging);
            assertThat(partial.restoredTokens()).isEqualTo(32);
            assertParity(partial, diverging);

            // next turn: history (prompt + answer) + new user tokens; pages 3 and 4 hold decoded tokens
            int[] turn2 = Arrays.copyOf(p, PROMPT_TOKENS + NEW_TOKENS + 12);
            System.arraycopy(first.generated(), 0, turn2, PROMPT_TOKENS, NEW_TOKENS);
            System.arraycopy(prompt(3, 12), 0, turn2, PROMPT_TOKENS + NEW_TOKENS, 12);
            RequestReport second = serve(store, engineModel, turn2);
            assertThat(second.restoredTokens()).isEqualTo(64);
            assertParity(second, turn2);
        }
    }

    @Test
    void hitAfterTheEngineProcessRestarts() throws Exception {
        int[] p = prompt(4, PROMPT_TOKENS);
        try (ManagerProcess m = ManagerLauncher.start(tmp.resolve("mgr"))) {
            List<String> cmd = EngineProcessMain.command(m.socket().toString(), tmp.resolve("child-model").toString(),
                    "engine-r", "1", "4", Integer.toString(PROMPT_TOKENS));
            Process child = new ProcessBuilder(cmd).redirectErrorStream(true).start();
            String out = new String(child.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertThat(child.waitFor(120, TimeUnit.SECONDS)).isTrue();
            assertThat(child.exitValue()).as(out).isZero();
            assertThat(out).contains("RESULT restored=0 published=4");

            try (OrbitKvPageStore restarted = OrbitKvPageStore.connect(m.socket(), "engine-r", 2, ns)) {
                RequestReport r = serve(restarted, engineModel, p);
                assertThat(r.restoredTokens()).isEqualTo(48);
                assertParity(r, p);
            }
        }
    }

    @Test
    void restoreIntoASecondEngineInstanceSharingTheManager() throws Exception {
        int[] p = prompt(5, PROMPT_TOKENS);
        AbstractModel secondModel = JlamaSessionRunner.loadModel(files.dir());
        try (ManagerProcess m = ManagerLauncher.start(tmp.resolve("mgr"));
             OrbitKvPageStore a = OrbitKvPageStore.connect(m.socket(), "replica-a", 1, ns);
             OrbitKvPageStore b = OrbitKvPageStore.connect(m.socket(), "replica-b", 1, ns)) {
            assertThat(serve(a, engineModel, p).published().sealed()).isEqualTo(4);
            RequestReport r = serve(b, secondModel, p);
            assertThat(r.restoredTokens()).isEqualTo(48);
            assertThat(r.source()).isEqualTo(HitSource.DRAM);
            assertParity(r, p);
        } finally {
            secondModel.close();
        }
    }

    @SuppressWarnings("try") // the store closes before the Manager stops; the try's close is then a no-op
    @Test
    void hitAfterTheManagerRestartsIsServedFromSsd_andACorruptedPageOnDiskBecomesAMiss() throws Exception {
        int[] p = prompt(6, PROMPT_TOKENS);
        int[] q = prompt(7, PROMPT_TOKENS);
        Path dir = tmp.resolve("mgr");
        try (ManagerProcess m = ManagerLauncher.start(dir);
             OrbitKvPageStore store = OrbitKvPageStore.connect(m.socket(), "engine-a", 1, ns)) {
            assertThat(serve(store, engineModel, p).published().sealed()).isEqualTo(4);
            assertThat(serve(store, engineModel, q).published().sealed()).isEqualTo(4);
            await().atMost(Duration.ofSeconds(30)).until(() -> m.metric("orbitkv_ssd_writes_total") >= 8);
            store.close();
            assertThat(m.terminate()).isZero();
        }
        // damage page 1 of q on disk while the Manager is down
        StateKey damaged = StateKeys.forTokens(ns.digest(), JlamaNamespace.GROUP, q, PAGE_TOKENS, new byte[0]).get(1);
        assertThat(ParityGateSupport.flipPayloadByte(dir.resolve("ssd"), damaged)).as("extent of page 1 found").isTrue();

        try (ManagerProcess m = ManagerLauncher.start(dir);
             OrbitKvPageStore store = OrbitKvPageStore.connect(m.socket(), "engine-a", 2, ns)) {
            RequestReport fromSsd = serve(store, engineModel, p);
            assertThat(fromSsd.restoredTokens()).isEqualTo(48);
            assertThat(fromSsd.source()).isEqualTo(HitSource.STAGED);
            assertParity(fromSsd, p);

            RequestReport corrupted = serve(store, engineModel, q);
            assertThat(corrupted.restoredTokens()).as("the damaged page 1 and everything after it is a miss").isEqualTo(16);
            assertParity(corrupted, q);
        }
    }

    @Test
    void aModelWithOtherWeightsMisses() throws Exception {
        int[] p = prompt(8, PROMPT_TOKENS);
        TinyLlamaModel otherFiles = TinyLlamaModel.generate(TinyLlamaSpec.ci().withSeed(99), tmp.resolve("other"));
        Namespace otherNs = JlamaNamespace.of(otherFiles, PAGE_TOKENS);
        assertThat(otherNs.digestHex()).isNotEqualTo(ns.digestHex());
        AbstractModel otherModel = JlamaSessionRunner.loadModel(otherFiles.dir());
        try (ManagerProcess m = ManagerLauncher.start(tmp.resolve("mgr"));
             OrbitKvPageStore a = OrbitKvPageStore.connect(m.socket(), "engine-a", 1, ns);
             OrbitKvPageStore other = OrbitKvPageStore.connect(m.socket(), "engine-other", 1, otherNs)) {
            assertThat(serve(a, engineModel, p).published().sealed()).isEqualTo(4);
            RequestReport r = new JlamaSessionRunner(otherModel, otherNs, other).run(p, NEW_TOKENS, System.nanoTime());
            assertThat(r.restoredTokens()).isZero();
            assertThat(r.source()).isEqualTo(HitSource.NONE);
            RequestReport otherCold = new JlamaSessionRunner(otherModel, otherNs, KvPageStore.cold()).run(p, NEW_TOKENS, System.nanoTime());
            assertThat(r.generated()).containsExactly(otherCold.generated());
            assertThat(r.generated()).as("other weights, other answer").isNotEqualTo(cold(p).generated());
        } finally {
            otherModel.close();
        }
    }
}
