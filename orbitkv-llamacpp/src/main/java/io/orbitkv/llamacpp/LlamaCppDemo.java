package io.orbitkv.llamacpp;

import io.orbitkv.engine.ConversationDemo;
import io.orbitkv.engine.KvPageStore;
import io.orbitkv.state.Namespace;
import io.orbitkv.testmodel.ByteFallbackVocab;
import io.orbitkv.testmodel.TinyLlamaModel;
import io.orbitkv.testmodel.TinyLlamaSpec;

import java.io.PrintStream;
import java.nio.file.Path;

/**
 * {@code bin/orbitkv demo --engine llamacpp}: a Manager, a generated Llama (GGUF) and a llama.cpp
 * engine, a short multi-turn conversation, and per turn the cold and warm time to first token,
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
        ConversationDemo.main(args, (work, bench) -> run(work, bench ? TinyLlamaSpec.bench() : TinyLlamaSpec.ci(), System.out));
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
