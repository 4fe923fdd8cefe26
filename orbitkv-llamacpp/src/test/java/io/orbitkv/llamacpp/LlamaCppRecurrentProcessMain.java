package io.orbitkv.llamacpp;

import io.orbitkv.engine.OrbitKvPageStore;
import io.orbitkv.engine.RequestReport;
import io.orbitkv.state.Namespace;
import io.orbitkv.testmodel.TinyMambaModel;
import io.orbitkv.testmodel.TinyMambaSpec;

import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;

/**
 * A llama.cpp engine running the CI Mamba in its own JVM, for the "engine process restarts" gate:
 * connects to the Manager at {@code args[0]}, generates the model into {@code args[1]}, registers
 * as {@code args[2]} at epoch {@code args[3]} with the recurrent contract, serves the prompt of
 * seed {@code args[4]} (length {@code args[5]}) with checkpoints every {@code args[6]} pages,
 * prints one {@code RESULT restored=N published=N} line and exits 0.
 */
public final class LlamaCppRecurrentProcessMain {

    private LlamaCppRecurrentProcessMain() {
    }

    static List<String> command(String... args) {
        return LlamaCppEngineProcessMain.command(LlamaCppRecurrentProcessMain.class, args);
    }

    public static void main(String[] args) throws Exception {
        TinyMambaModel files = TinyMambaModel.generate(TinyMambaSpec.ci(), Path.of(args[1]));
        int[] prompt = LlamaCppRecurrentParityGateTest.prompt(Long.parseLong(args[4]), Integer.parseInt(args[5]));
        try (LlamaCppEngine engine = LlamaCppEngine.load(files.ggufFile(),
                LlamaCppEngine.Settings.deterministic(LlamaCppRecurrentParityGateTest.CONTEXT))) {
            Namespace ns = LlamaCppNamespace.ofRecurrent(files, LlamaCppRecurrentRunner.layout(engine),
                    LlamaCppRecurrentParityGateTest.PAGE_TOKENS);
            try (OrbitKvPageStore store = OrbitKvPageStore.connect(Path.of(args[0]), args[2], Long.parseLong(args[3]), ns,
                    LlamaCppRecurrentRunner.contract(ns.pageTokens()))) {
                RequestReport r = new LlamaCppRecurrentRunner(engine, ns, store, Integer.parseInt(args[6]))
                        .run(prompt, LlamaCppRecurrentParityGateTest.NEW_TOKENS, System.nanoTime());
                System.out.println("RESULT restored=" + r.restoredTokens() + " published=" + r.published().sealed()
                        + " tokens=" + Arrays.toString(r.generated()));
            }
        }
        System.exit(0);
    }
}
