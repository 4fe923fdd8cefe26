package io.orbitkv.jlama;

import com.github.tjake.jlama.model.AbstractModel;
import io.orbitkv.engine.HandoffCluster;
import io.orbitkv.engine.OrbitKvPageStore;
import io.orbitkv.engine.ParityGateSupport;
import io.orbitkv.engine.RequestReport;
import io.orbitkv.state.Namespace;
import io.orbitkv.testkit.ProcessTest;
import io.orbitkv.testmodel.TinyLlamaModel;
import io.orbitkv.testmodel.TinyLlamaSpec;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Prefill/decode handoff across hosts with Jlama: host A (this JVM's engine, Manager A) prefills
 * a prompt and publishes its pages; host B (an engine in another JVM, Manager B, both Managers
 * members of one real etcd) restores the whole prefix from A on its first QUERY and decodes.
 * B's tokens and every logit must equal, bit for bit, those of a cold control on its own model
 * instance; B's restored token count and Manager B's staged peer fetches prove the pages crossed
 * hosts (Manager B held nothing and answered no QUERY before); nothing stays held on either
 * Manager.
 */
@ProcessTest
class HandoffTest {

    @TempDir
    Path tmp;

    @Test
    void aPrefixPrefilledOnHostAIsRestoredWholeByHostBsFirstQuery_bitIdenticalToCold() throws Exception {
        TinyLlamaModel files = TinyLlamaModel.generate(TinyLlamaSpec.ci(), tmp.resolve("model"));
        Namespace ns = JlamaNamespace.of(files, ParityGateTest.PAGE_TOKENS);
        long pageBytes = new JlamaKvPageLayout(TinyLlamaSpec.ci().layers(), TinyLlamaSpec.ci().kvWidth(),
                ParityGateTest.PAGE_TOKENS).pageBytes();
        int[] p = ParityGateTest.prompt(21, ParityGateTest.PROMPT_TOKENS);
        AbstractModel prefillModel = JlamaSessionRunner.loadModel(files.dir());
        AbstractModel controlModel = JlamaSessionRunner.loadModel(files.dir());
        try (HandoffCluster hosts = HandoffCluster.start(tmp.resolve("hosts"), pageBytes)) {
            ColdControl control = new ColdControl(controlModel, ns, ParityGateTest.NEW_TOKENS);

            // host A prefills and publishes: the 3 prompt pages and the page the decode completed
            try (OrbitKvPageStore onA = OrbitKvPageStore.connect(hosts.prefillHost().socket(), "prefill-a", 1, ns)) {
                RequestReport prefilled = new JlamaSessionRunner(prefillModel, ns, onA)
                        .run(p, ParityGateTest.NEW_TOKENS, System.nanoTime());
                assertThat(prefilled.restoredTokens()).isZero();
                assertThat(prefilled.published().sealed()).isEqualTo(4);
                control.assertParity(prefilled, p);
            }
            hosts.awaitCatalogAcknowledged(4);
            HandoffCluster.assertUntouched(hosts.decodeHost());

            // host B: another engine JVM, one request, its first QUERY
            Path report = tmp.resolve("decode-b.report");
            RequestReport decoded = HandoffCluster.decodeInAnotherJvm(EngineProcessMain.command(
                    hosts.decodeHost().socket().toString(),
                    tmp.resolve("child-model").toString(), "decode-b", "1", "21",
                    Integer.toString(ParityGateTest.PROMPT_TOKENS), report.toString()), report);

            hosts.assertRestoredFromPrefillHost(decoded, 3, ParityGateTest.PAGE_TOKENS, pageBytes);
            assertThat(decoded.prefilledTokens()).isEqualTo(10);
            control.assertParity(decoded, p);
            hosts.awaitDrained();
        } finally {
            prefillModel.close();
            controlModel.close();
        }
    }
}
