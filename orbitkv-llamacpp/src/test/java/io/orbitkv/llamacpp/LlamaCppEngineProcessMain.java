package io.orbitkv.llamacpp;

import io.orbitkv.engine.OrbitKvPageStore;
import io.orbitkv.engine.ParityGateSupport;
import io.orbitkv.engine.RequestReport;
import io.orbitkv.state.Namespace;
import io.orbitkv.testmodel.TinyLlamaModel;
import io.orbitkv.testmodel.TinyLlamaSpec;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * A llama.cpp engine in its own JVM for the "engine process restarts" and handoff gates:
 * connects to the Manager at {@code args[0]}, generates the CI model into {@code args[1]},
 * registers as {@code args[2]} at epoch {@code args[3]}, serves the prompt of seed {@code args[4]}
 * (length {@code args[5]}), prints one {@code RESULT restored=N published=N} line, writes the
 * whole report (tokens and logits) to {@code args[6]} when given, and exits 0.
 */
public final class LlamaCppEngineProcessMain {

    private LlamaCppEngineProcessMain() {
    }

    /** The command line running this main on the test class path with {@code args}. */
    static List<String> command(String... args) {
        return command(LlamaCppEngineProcessMain.class, args);
    }

    /** The command line running {@code main}'s {@code main} on the test class path with {@code args}. */
    static List<String> command(Class<?> main, String... args) {
        List<String> cmd = new ArrayList<>(List.of(ProcessHandle.current().info().command().orElseThrow(),
                "--enable-native-access=ALL-UNNAMED", "-cp", System.getProperty("java.class.path"), main.getName()));
        cmd.addAll(List.of(args));
        return cmd;
    }

    public static void main(String[] args) throws Exception {
        Path socket = Path.of(args[0]);
        TinyLlamaModel files = TinyLlamaModel.generate(TinyLlamaSpec.ci(), Path.of(args[1]));
        int[] prompt = LlamaCppParityGateTest.prompt(Long.parseLong(args[4]), Integer.parseInt(args[5]));
        try (LlamaCppEngine engine = LlamaCppEngine.load(files.ggufFile(),
                LlamaCppEngine.Settings.deterministic(LlamaCppParityGateTest.CONTEXT))) {
            Namespace ns = LlamaCppNamespace.of(files, LlamaCppSessionRunner.layout(engine, LlamaCppParityGateTest.PAGE_TOKENS));
            try (OrbitKvPageStore store = OrbitKvPageStore.connect(socket, args[2], Long.parseLong(args[3]), ns)) {
                RequestReport r = new LlamaCppSessionRunner(engine, ns, store)
                        .run(prompt, LlamaCppParityGateTest.NEW_TOKENS, System.nanoTime());
                System.out.println("RESULT restored=" + r.restoredTokens() + " published=" + r.published().sealed()
                        + " tokens=" + Arrays.toString(r.generated()));
                if (args.length > 6) ParityGateSupport.writeReport(r, Path.of(args[6]));
            }
        }
        System.exit(0);
    }
}
