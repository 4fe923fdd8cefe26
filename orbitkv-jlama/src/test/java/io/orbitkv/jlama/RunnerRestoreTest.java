package io.orbitkv.jlama;

import io.orbitkv.engine.KvPageStore;
import io.orbitkv.engine.PrefixLookup;
import io.orbitkv.engine.RequestReport;
import com.github.tjake.jlama.model.AbstractModel;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.StateKey;
import io.orbitkv.testmodel.TinyLlamaModel;
import io.orbitkv.testmodel.TinyLlamaSpec;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.Arrays;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The runner's restore and publish paths over an in-memory store (no Manager): what is looked
 * up, what is published, that leases are returned, and that the parity gate's comparison does
 * fail when a restored page is wrong (the store here has no checksums to turn it into a miss).
 */
class RunnerRestoreTest {

    static final int P = ParityGateTest.PAGE_TOKENS;
    @TempDir
    static Path dir;
    static AbstractModel model;
    static AbstractModel controlModel;
    static Namespace ns;
    static ColdControl control;

    @BeforeAll
    static void load() throws Exception {
        TinyLlamaModel files = TinyLlamaModel.generate(TinyLlamaSpec.ci(), dir.resolve("m"));
        model = JlamaSessionRunner.loadModel(files.dir());
        ns = JlamaNamespace.of(files, P);
        controlModel = JlamaSessionRunner.loadModel(files.dir());
        control = new ColdControl(controlModel, ns, ParityGateTest.NEW_TOKENS);
    }

    @AfterAll
    static void close() {
        model.close();
        controlModel.close();
    }

    @Test
    void publishesCompletePagesOfPromptAndAnswerAndRestoresThemWithParity() {
        var store = new InMemoryPageStore();
        var runner = new JlamaSessionRunner(model, ns, store);
        int[] p = ParityGateTest.prompt(11, 50);
        RequestReport first = runner.run(p, ParityGateTest.NEW_TOKENS, System.nanoTime());
        // KV holds 50 + 11 = 61 positions: 3 complete pages
        assertThat(first.published()).isEqualTo(new KvPageStore.PublishReport(3, 0, 0));
        assertThat(store.pages).hasSize(3);
        assertThat(first.ttftNanos()).isPositive();

        RequestReport again = runner.run(p, ParityGateTest.NEW_TOKENS, System.nanoTime());
        assertThat(again.restoredTokens()).isEqualTo(48);
        // each run reported exactly the prompt tokens it computed, with a positive duration
        assertThat(store.prefills).extracting(s -> s[0]).containsExactly(50L, 2L);
        assertThat(store.prefills).allSatisfy(s -> assertThat(s[1]).isPositive());
        assertThat(again.restoredBytes()).isEqualTo(3 * runner.layout().pageBytes());
        assertThat(again.published()).isEqualTo(KvPageStore.PublishReport.NONE);
        assertThat(store.leasesOut).as("the lease is released after the copy").isZero();
        control.assertParity(again, p);
    }

    @Test
    void aPromptOfExactlyOnePageRestoresNothingBecauseOneTokenMustBeComputed() {
        var store = new InMemoryPageStore();
        var runner = new JlamaSessionRunner(model, ns, store);
        int[] p = ParityGateTest.prompt(12, P + 1);
        runner.run(p, 2, System.nanoTime());
        int[] exactlyOnePage = Arrays.copyOf(p, P);
        RequestReport r = runner.run(exactlyOnePage, 2, System.nanoTime());
        assertThat(r.restoredTokens()).isZero();
        assertThat(r.prefilledTokens()).isEqualTo(P);
        RequestReport longer = runner.run(p, 2, System.nanoTime());
        assertThat(longer.restoredTokens()).isEqualTo(P);
    }

    @Test
    void theGateFailsWhenARestoredPageIsWrong() {
        var store = new InMemoryPageStore();
        var runner = new JlamaSessionRunner(model, ns, store);
        int[] p = ParityGateTest.prompt(13, 58);
        runner.run(p, ParityGateTest.NEW_TOKENS, System.nanoTime());
        JlamaKvPageLayout layout = runner.layout();
        for (MemorySegment image : store.pages.values()) {
            long at = layout.offset(0, 0, 5);                     // layer 0, K, slot 5 of every page
            image.set(ValueLayout.JAVA_FLOAT_UNALIGNED, at, image.get(ValueLayout.JAVA_FLOAT_UNALIGNED, at) + 0.5f);
        }
        RequestReport tampered = runner.run(p, ParityGateTest.NEW_TOKENS, System.nanoTime());
        assertThat(tampered.restoredTokens()).isEqualTo(48);
        assertThatThrownBy(() -> control.assertParity(tampered, p)).isInstanceOf(AssertionError.class);
    }

    @Test
    void aSevenPageHitRestoresWithParity() {
        var store = new InMemoryPageStore();
        var runner = new JlamaSessionRunner(model, ns, store);
        int[] longer = ParityGateTest.prompt(14, 120);
        control.assertParity(runner.run(longer, ParityGateTest.NEW_TOKENS, System.nanoTime()), longer);
        RequestReport hit = runner.run(longer, ParityGateTest.NEW_TOKENS, System.nanoTime());
        assertThat(hit.restoredTokens()).as("7 pages").isEqualTo(112);
        assertThat(hit.breakdown().copyNanos()).isPositive();
        control.assertParity(hit, longer);
    }

    @Test
    void pageLayoutIsLayerMajorKBeforeV() {
        JlamaKvPageLayout layout = new JlamaKvPageLayout(2, 32, 16);
        assertThat(layout.vectorBytes()).isEqualTo(128);
        assertThat(layout.pageBytes()).isEqualTo(2 * 2 * 16 * 128);
        assertThat(layout.offset(0, 0, 1)).isEqualTo(128);
        assertThat(layout.offset(0, 1, 0)).isEqualTo(16 * 128);
        assertThat(layout.offset(1, 0, 0)).isEqualTo(2 * 16 * 128);
        assertThat(layout.offset(1, 1, 15) + layout.vectorBytes()).isEqualTo(layout.pageBytes());
    }

    @Test
    void namespaceBindsWeightsTokenizerLayoutAndPageSize() {
        assertThat(ns.kvLayout()).isEqualTo("jlama-kv-v1");
        assertThat(ns.dtype()).isEqualTo("f32");
        assertThat(ns.pageTokens()).isEqualTo(P);
        assertThat(ns.tpSize()).isEqualTo(1);
        assertThat(ns.ppSize()).isEqualTo(1);
        Namespace otherPage = JlamaNamespace.of(ns.modelId(), ns.revision(), ns.weightsDigest(), ns.tokenizerDigest(), 32);
        assertThat(otherPage.digestHex()).isNotEqualTo(ns.digestHex());
        assertThat(JlamaNamespace.contract(P).groups()).hasSize(1);
        assertThat(JlamaNamespace.contract(P).groups().getFirst().kind()).isEqualTo("full");
    }

    @Test
    void aRunnerRefusesANamespaceOfAnotherLayout() {
        Namespace other = new Namespace("m", "r", "w", "t", "", "f32", "nhd", P, 1, 0, 1, 0, 1);
        assertThatThrownBy(() -> new JlamaSessionRunner(model, other, KvPageStore.cold()))
                .hasMessageContaining("jlama-kv-v1");
    }

    @Test
    void coldStoreNeverHitsNorPublishes() {
        KvPageStore cold = KvPageStore.cold();
        assertThat(cold.lookupPrefix(java.util.List.of(StateKey.ofBytes(new byte[32])), 40))
                .isInstanceOf(PrefixLookup.Miss.class);
        assertThat(cold.publish(java.util.List.of(StateKey.ofBytes(new byte[32])), 8, (i, s) -> {
            throw new AssertionError("must not be asked to write");
        })).isEqualTo(KvPageStore.PublishReport.NONE);
    }
}
