package io.orbitkv.llamacpp;

import io.orbitkv.engine.HandoffCluster;
import io.orbitkv.engine.KvPageStore;
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
 * Prefill/decode handoff across hosts with llama.cpp: host A (this JVM's engine, Manager A)
 * prefills a prompt and publishes its pages; host B (an engine in another JVM, Manager B, both
 * Managers members of one real etcd) restores the whole prefix from A on its first QUERY and
 * decodes. B's tokens and every logit must equal, bit for bit, those of a cold control that
 * never touched OrbitKV; B's restored token count and Manager B's staged peer fetches prove the
 * pages crossed hosts (Manager B held nothing and answered no QUERY before); nothing stays held
 * on either Manager.
 */
@ProcessTest
class LlamaCppHandoffTest {

    /** llama.cpp's sequence-state page of the CI model, 16 tokens. */
    static final long PAGE_BYTES = 4096;

    @TempDir
    Path tmp;

    @Test
    void aPrefixPrefilledOnHostAIsRestoredWholeByHostBsFirstQuery_bitIdenticalToCold() throws Exception {
        TinyLlamaModel files = TinyLlamaModel.generate(TinyLlamaSpec.ci(), tmp.resolve("model"));
        int[] p = LlamaCppParityGateTest.prompt(21, LlamaCppParityGateTest.PROMPT_TOKENS);
        try (LlamaCppEngine prefill = LlamaCppEngine.load(files.ggufFile(),
                LlamaCppEngine.Settings.deterministic(LlamaCppParityGateTest.CONTEXT));
             HandoffCluster hosts = HandoffCluster.start(tmp.resolve("hosts"), PAGE_BYTES)) {
            Namespace ns = LlamaCppNamespace.of(files, LlamaCppSessionRunner.layout(prefill, LlamaCppParityGateTest.PAGE_TOKENS));
            RequestReport cold = new LlamaCppSessionRunner(prefill, ns, KvPageStore.cold())
                    .run(p, LlamaCppParityGateTest.NEW_TOKENS, System.nanoTime());
            assertThat(cold.restoredTokens()).isZero();

            // host A prefills and publishes the 3 prompt pages
            try (OrbitKvPageStore onA = OrbitKvPageStore.connect(hosts.prefillHost().socket(), "prefill-a", 1, ns)) {
                RequestReport prefilled = new LlamaCppSessionRunner(prefill, ns, onA)
                        .run(p, LlamaCppParityGateTest.NEW_TOKENS, System.nanoTime());
                assertThat(prefilled.restoredTokens()).isZero();
                assertThat(prefilled.published().sealed()).isEqualTo(3);
                ParityGateSupport.assertBitIdentical(prefilled, cold);
            }
            hosts.awaitCatalogAcknowledged(3);
            HandoffCluster.assertUntouched(hosts.decodeHost());

            // host B: another engine JVM, one request, its first QUERY
            Path report = tmp.resolve("decode-b.report");
            RequestReport decoded = HandoffCluster.decodeInAnotherJvm(LlamaCppEngineProcessMain.command(
                    hosts.decodeHost().socket().toString(),
                    tmp.resolve("child-model").toString(), "decode-b", "1", "21",
                    Integer.toString(LlamaCppParityGateTest.PROMPT_TOKENS), report.toString()), report);

            hosts.assertRestoredFromPrefillHost(decoded, 3, LlamaCppParityGateTest.PAGE_TOKENS, PAGE_BYTES);
            assertThat(decoded.prefilledTokens()).isEqualTo(10);
            ParityGateSupport.assertBitIdentical(decoded, cold);
            hosts.awaitDrained();
        }
    }
}
