package io.orbitkv.llamacpp;

import io.orbitkv.engine.KvPageStore;
import io.orbitkv.engine.ManagerLauncher;
import io.orbitkv.engine.OrbitKvPageStore;
import io.orbitkv.engine.RequestReport;
import io.orbitkv.state.Namespace;
import io.orbitkv.testmodel.ByteFallbackVocab;
import io.orbitkv.testmodel.TinyLlamaModel;
import io.orbitkv.testmodel.TinyLlamaSpec;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

/**
 * {@code bin/orbitkv demo --engine llamacpp}: a Manager, a generated Llama (GGUF) and a llama.cpp
 * engine, a short multi-turn conversation, and per turn the cold and warm time to first token,
 * the tokens restored and prefilled, the bytes restored and where the hit came from; then the
 * Manager restarts and the last turn is served again from its SSD store.
 *
 * <p>Owns a temporary directory (model files, Manager store), deleted at the end unless
 * {@code --keep}. Single-threaded. Each turn's prompt is the whole history plus the new user
 * text, so every turn after the first restores what earlier turns published. The cold column is
 * a second llama.cpp context on its own model that never talks to OrbitKV; "same" says whether
 * warm and cold produced the same greedy tokens and logit bits.
 *
 * <p>Design note: the same conversation and table as the Jlama demo, so the two engines can be
 * compared side by side; TTFT includes the QUERY round trip, assembling the prefix blob and
 * {@code llama_state_seq_set_data}, and the prefill of the rest. One thread per context (the
 * parity settings); with the CI model every number is well under a millisecond per token.
 */
public final class LlamaCppDemo {

    private static final int PAGE_TOKENS = 16;
    private static final int ANSWER_TOKENS = 16;
    private static final String SYSTEM = "You are OrbitKV's demo assistant. Be brief.\n";
    private static final List<String> USER_TURNS = List.of(
            "User: what is a KV cache?\n", "User: and a prefix hit?\n", "User: why pages?\n", "User: thanks!\n");

    private LlamaCppDemo() {
    }

    public static void main(String[] args) throws Exception {
        boolean bench = Arrays.asList(args).contains("--bench-model");
        boolean keep = Arrays.asList(args).contains("--keep");
        Path work = Files.createTempDirectory("orbitkv-demo-");
        try {
            run(work, bench ? TinyLlamaSpec.bench() : TinyLlamaSpec.ci(), System.out);
        } finally {
            if (keep) System.out.println("kept " + work);
            else deleteTree(work);
        }
        System.exit(0);
    }

    /** Runs the demo under {@code work}, printing to {@code out}; returns how many turns were not bit-identical to cold. */
    static int run(Path work, TinyLlamaSpec spec, PrintStream out) throws Exception {
        out.printf("orbitkv demo (llama.cpp %s, %s): generating %s (%d layers, hidden %d, %d/%d heads) ...%n",
                LlamaCppAbi.BUILD_TAG, LlamaCppAbi.COMMIT, spec.name(), spec.layers(), spec.hidden(), spec.heads(), spec.kvHeads());
        TinyLlamaModel files = TinyLlamaModel.generate(spec, work.resolve("model"));
        LlamaCppEngine.Settings settings = LlamaCppEngine.Settings.deterministic(Math.min(spec.context(), 1024));
        int differing = 0;
        try (LlamaCppEngine warmEngine = LlamaCppEngine.load(files.ggufFile(), settings);
             LlamaCppEngine coldEngine = LlamaCppEngine.load(files.ggufFile(), settings)) {
            LlamaCppKvPageLayout layout = LlamaCppSessionRunner.layout(warmEngine, PAGE_TOKENS);
            Namespace ns = LlamaCppNamespace.of(files, layout);
            long pageBytes = layout.pageBytes();
            LlamaCppSessionRunner cold = new LlamaCppSessionRunner(coldEngine, ns, KvPageStore.cold());
            Path managerDir = work.resolve("manager");
            out.println("orbitkv demo: starting a Manager in " + managerDir);
            int[] history = new int[0];
            int[] lastPrompt = null;
            try (ManagerLauncher manager = ManagerLauncher.start(managerDir, pageBytes);
                 OrbitKvPageStore store = OrbitKvPageStore.connect(manager.socket(), "demo-llamacpp", 1, ns)) {
                LlamaCppSessionRunner warm = new LlamaCppSessionRunner(warmEngine, ns, store);
                header(out);
                for (int turn = 0; turn < USER_TURNS.size(); turn++) {
                    int[] user = turn == 0 ? ByteFallbackVocab.encode(SYSTEM + USER_TURNS.get(0))
                            : ByteFallbackVocab.encodeContinuation(USER_TURNS.get(turn));
                    int[] prompt = concat(history, user);
                    RequestReport c = cold.run(prompt, ANSWER_TOKENS, System.nanoTime());
                    RequestReport w = warm.run(prompt, ANSWER_TOKENS, System.nanoTime());
                    differing += row(out, "turn " + (turn + 1), c, w);
                    history = concat(prompt, w.generated());
                    lastPrompt = prompt;
                }
                store.close();
                out.println("orbitkv demo: stopping the Manager (exit " + manager.stop() + ") and starting it again on the same SSD store");
            }
            try (ManagerLauncher manager = ManagerLauncher.start(managerDir, pageBytes);
                 OrbitKvPageStore store = OrbitKvPageStore.connect(manager.socket(), "demo-llamacpp", 2, ns)) {
                LlamaCppSessionRunner warm = new LlamaCppSessionRunner(warmEngine, ns, store);
                RequestReport c = cold.run(lastPrompt, ANSWER_TOKENS, System.nanoTime());
                RequestReport w = warm.run(lastPrompt, ANSWER_TOKENS, System.nanoTime());
                header(out);
                differing += row(out, "turn 4 again", c, w);
            }
        }
        out.println("source: DRAM = pages resident in Manager memory; STAGED = read back from the SSD store first; "
                + "same = identical greedy tokens and logit bits to the cold engine");
        return differing;
    }

    private static void header(PrintStream out) {
        out.printf("%-13s %7s %13s %13s %9s %10s %10s %8s %5s%n", "", "prompt", "cold TTFT ms", "warm TTFT ms",
                "restored", "prefilled", "bytes", "source", "same");
    }

    /** Prints one turn; returns 1 when warm and cold differ. */
    private static int row(PrintStream out, String label, RequestReport cold, RequestReport warm) {
        boolean same = sameOutput(cold, warm);
        out.printf("%-13s %7d %13.2f %13.2f %9d %10d %10d %8s %5s%n", label, warm.promptTokens(), cold.ttftNanos() / 1e6,
                warm.ttftNanos() / 1e6, warm.restoredTokens(), warm.prefilledTokens(), warm.restoredBytes(), warm.source(),
                same ? "yes" : "NO");
        return same ? 0 : 1;
    }

    static boolean sameOutput(RequestReport a, RequestReport b) {
        if (!Arrays.equals(a.generated(), b.generated())) return false;
        for (int i = 0; i < a.logits().length; i++) {
            for (int v = 0; v < a.logits()[i].length; v++) {
                if (Float.floatToRawIntBits(a.logits()[i][v]) != Float.floatToRawIntBits(b.logits()[i][v])) return false;
            }
        }
        return true;
    }

    private static int[] concat(int[] a, int[] b) {
        int[] out = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }

    private static void deleteTree(Path dir) throws IOException {
        try (Stream<Path> s = Files.walk(dir)) {
            for (Path p : s.sorted(Comparator.reverseOrder()).toList()) Files.deleteIfExists(p);
        }
    }
}
