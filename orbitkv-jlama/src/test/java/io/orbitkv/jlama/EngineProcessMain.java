package io.orbitkv.jlama;

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
 * A Jlama engine in its own JVM for the "engine process restarts" and handoff gates: connects
 * to the Manager at {@code args[0]}, loads the CI model from {@code args[1]}, registers as
 * {@code args[2]} at epoch {@code args[3]}, serves the prompt of seed {@code args[4]} (length
 * {@code args[5]}), prints one {@code RESULT restored=N published=N} line, writes the whole
 * report (tokens and logits) to {@code args[6]} when given, and exits 0.
 */
public final class EngineProcessMain {

    private EngineProcessMain() {
    }

    /**
     * The command line running this main on the test class path with {@code args}, with the
     * parity gates' JVM flags (the Vector API on its bit-stable Java fallback).
     */
    static List<String> command(String... args) {
        List<String> cmd = new ArrayList<>(List.of(ProcessHandle.current().info().command().orElseThrow(),
                "--add-modules", "jdk.incubator.vector", "-XX:+UnlockExperimentalVMOptions", "-XX:-EnableVectorSupport",
                "--enable-native-access=ALL-UNNAMED", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                "-cp", System.getProperty("java.class.path"), EngineProcessMain.class.getName()));
        cmd.addAll(List.of(args));
        return cmd;
    }

    public static void main(String[] args) throws Exception {
        Path socket = Path.of(args[0]);
        TinyLlamaModel files = TinyLlamaModel.generate(TinyLlamaSpec.ci(), Path.of(args[1]));
        Namespace ns = JlamaNamespace.of(files, ParityGateTest.PAGE_TOKENS);
        int[] prompt = ParityGateTest.prompt(Long.parseLong(args[4]), Integer.parseInt(args[5]));
        var model = JlamaSessionRunner.loadModel(files.dir());
        try (OrbitKvPageStore store = OrbitKvPageStore.connect(socket, args[2], Long.parseLong(args[3]), ns)) {
            RequestReport r = new JlamaSessionRunner(model, ns, store).run(prompt, ParityGateTest.NEW_TOKENS, System.nanoTime());
            System.out.println("RESULT restored=" + r.restoredTokens() + " published=" + r.published().sealed()
                    + " tokens=" + Arrays.toString(r.generated()));
            if (args.length > 6) ParityGateSupport.writeReport(r, Path.of(args[6]));
        }
        model.close();
        System.exit(0);
    }
}
