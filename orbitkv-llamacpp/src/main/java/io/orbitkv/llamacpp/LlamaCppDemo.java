package io.orbitkv.llamacpp;

import io.orbitkv.engine.ConversationDemo;
import io.orbitkv.engine.KvPageStore;
import io.orbitkv.state.Namespace;
import io.orbitkv.testmodel.ByteFallbackVocab;
import io.orbitkv.testmodel.TinyLlamaModel;
import io.orbitkv.testmodel.TinyLlamaSpec;
import io.orbitkv.testmodel.TinyMambaModel;
import io.orbitkv.testmodel.TinyMambaSpec;

import java.io.PrintStream;
import java.nio.file.Path;

/**
 * {@code bin/orbitkv demo --engine llamacpp [--model llama|recurrent]}: a Manager, a generated
 * Llama (or, with {@code --model recurrent}, a Mamba whose state is restored from recurrent
 * checkpoints) as GGUF and a llama.cpp engine, a short multi-turn conversation, and per turn the cold and warm time to first token,
 * the tokens restored and prefilled, the bytes restored and where the hit came from; then the
 * Manager restarts and the last turn is served again from its SSD store.
 *
 * <p>Owns the two llama.cpp engines (closed at the end); the conversation, the Managers and the
 * table are {@link ConversationDemo}'s. Single-threaded. The cold column is a second llama.cpp
 * context on its own model that never talks to OrbitKV.
 *
 * <p>Design note: the same conversation and table as the Jlama demo, so the two engines can be
 * compared side by side; TTFT includes the QUERY round trip, assembling the prefix blob and
 * {@code llama_state_seq_set_data}, and the prefill of the rest. One thread per context (the
 * parity settings); with the CI model every number is well under a millisecond per token.
 */
public final class LlamaCppDemo {

    private LlamaCppDemo() {
    }

    public static void main(String[] args) throws Exception {
        String model = "llama";
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--model")) model = i + 1 < args.length ? args[i + 1] : "";
        }
        switch (model) {
            case "llama" -> ConversationDemo.main(args, (work, bench) -> run(work, bench ? TinyLlamaSpec.bench() : TinyLlamaSpec.ci(), System.out));
            case "recurrent" -> ConversationDemo.main(args,
                    (work, bench) -> runRecurrent(work, bench ? TinyMambaSpec.bench() : TinyMambaSpec.ci(), System.out));
            default -> {
                System.err.println("orbitkv: --model needs llama or recurrent, got '" + model + "'");
                System.exit(2);
            }
        }
    }

    /**
     * The same conversation on the generated Mamba ({@code --model recurrent}): each turn restores
     * the recurrent checkpoint at the last page boundary of the previous turn's prompt (the
     * answer's decode steps are not checkpointed) and prefills the rest; checkpoints every page.
     * Returns how many turns were not bit-identical to cold.
     */
    static int runRecurrent(Path work, TinyMambaSpec spec, PrintStream out) throws Exception {
        out.printf("orbitkv demo (llama.cpp %s, %s): generating %s (Mamba-1, %d layers, hidden %d, inner %d, state %d) ...%n",
                LlamaCppAbi.BUILD_TAG, LlamaCppAbi.COMMIT, spec.name(), spec.layers(), spec.hidden(), spec.inner(), spec.stateSize());
        TinyMambaModel files = TinyMambaModel.generate(spec, work.resolve("model"));
        LlamaCppEngine.Settings settings = LlamaCppEngine.Settings.deterministic(Math.min(spec.context(), 1024));
        try (LlamaCppEngine warmEngine = LlamaCppEngine.load(files.ggufFile(), settings);
             LlamaCppEngine coldEngine = LlamaCppEngine.load(files.ggufFile(), settings)) {
            LlamaCppRecurrentLayout layout = LlamaCppRecurrentRunner.layout(warmEngine);
            Namespace ns = LlamaCppNamespace.ofRecurrent(files, layout, ConversationDemo.PAGE_TOKENS);
            LlamaCppRecurrentRunner cold = new LlamaCppRecurrentRunner(coldEngine, ns, KvPageStore.cold(), 1);
            ConversationDemo.Engine engine = new ConversationDemo.Engine(ns, layout.checkpointBytes(), "demo-llamacpp-mamba",
                    cold::run, store -> new LlamaCppRecurrentRunner(warmEngine, ns, store, 1)::run,
                    new ConversationDemo.Vocab(ByteFallbackVocab::encode, ByteFallbackVocab::encodeContinuation), true,
                    LlamaCppRecurrentRunner.contract(ConversationDemo.PAGE_TOKENS));
            return ConversationDemo.run(engine, work.resolve("manager"), out);
        }
    }

    /** Runs the demo under {@code work}, printing to {@code out}; returns how many turns were not bit-identical to cold. */
    static int run(Path work, TinyLlamaSpec spec, PrintStream out) throws Exception {
        out.printf("orbitkv demo (llama.cpp %s, %s): generating %s (%d layers, hidden %d, %d/%d heads) ...%n",
                LlamaCppAbi.BUILD_TAG, LlamaCppAbi.COMMIT, spec.name(), spec.layers(), spec.hidden(), spec.heads(), spec.kvHeads());
        TinyLlamaModel files = TinyLlamaModel.generate(spec, work.resolve("model"));
        LlamaCppEngine.Settings settings = LlamaCppEngine.Settings.deterministic(Math.min(spec.context(), 1024));
        try (LlamaCppEngine warmEngine = LlamaCppEngine.load(files.ggufFile(), settings);
             LlamaCppEngine coldEngine = LlamaCppEngine.load(files.ggufFile(), settings)) {
            LlamaCppKvPageLayout layout = LlamaCppSessionRunner.layout(warmEngine, ConversationDemo.PAGE_TOKENS);
            Namespace ns = LlamaCppNamespace.of(files, layout);
            LlamaCppSessionRunner cold = new LlamaCppSessionRunner(coldEngine, ns, KvPageStore.cold());
            ConversationDemo.Engine engine = new ConversationDemo.Engine(ns, layout.pageBytes(), "demo-llamacpp", cold::run,
                    store -> new LlamaCppSessionRunner(warmEngine, ns, store)::run,
                    new ConversationDemo.Vocab(ByteFallbackVocab::encode, ByteFallbackVocab::encodeContinuation), true);
            return ConversationDemo.run(engine, work.resolve("manager"), out);
        }
    }
}
