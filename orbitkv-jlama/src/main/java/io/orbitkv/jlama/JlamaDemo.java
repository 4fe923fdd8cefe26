package io.orbitkv.jlama;

import com.github.tjake.jlama.model.AbstractModel;
import io.orbitkv.engine.ConversationDemo;
import io.orbitkv.engine.KvPageStore;
import io.orbitkv.state.Namespace;
import io.orbitkv.testmodel.ByteFallbackVocab;
import io.orbitkv.testmodel.TinyLlamaModel;
import io.orbitkv.testmodel.TinyLlamaSpec;

import java.io.PrintStream;
import java.nio.file.Path;

/**
 * {@code bin/orbitkv demo}: a Manager, a generated Llama and a Jlama engine, a short multi-turn
 * conversation, and per turn the cold and warm time to first token, the tokens restored and
 * prefilled, and where the hit came from; then the Manager restarts and the last turn is served
 * again from its SSD store.
 *
 * <p>Owns the two Jlama model instances (closed at the end); the conversation, the Managers and
 * the table are {@link ConversationDemo}'s. Single-threaded. The cold column is a second engine
 * on its own model instance that never talks to OrbitKV.
 *
 * <p>Design note: TTFT includes the QUERY round trip, the copy out of the shared arena and the
 * prefill of the rest; the model is tiny (CI preset) unless {@code --bench-model}, so the numbers
 * show the shape (restored tokens are not recomputed), not production latencies. Each turn is
 * run once cold first, which also warms the JIT for the warm run that follows.
 */
public final class JlamaDemo {

    private JlamaDemo() {
    }

    public static void main(String[] args) throws Exception {
        ConversationDemo.main(args, (work, bench) -> run(work, bench ? TinyLlamaSpec.bench() : TinyLlamaSpec.ci(), System.out));
    }

    /** Runs the demo under {@code work}, printing to {@code out}; returns how many turns were not bit-identical to cold. */
    static int run(Path work, TinyLlamaSpec spec, PrintStream out) throws Exception {
        out.printf("orbitkv demo: generating %s (%d layers, hidden %d, %d/%d heads) ...%n", spec.name(), spec.layers(),
                spec.hidden(), spec.heads(), spec.kvHeads());
        TinyLlamaModel files = TinyLlamaModel.generate(spec, work.resolve("model"));
        Namespace ns = JlamaNamespace.of(files, ConversationDemo.PAGE_TOKENS);
        AbstractModel warmModel = JlamaSessionRunner.loadModel(files.dir());
        AbstractModel coldModel = JlamaSessionRunner.loadModel(files.dir());
        try {
            JlamaSessionRunner cold = new JlamaSessionRunner(coldModel, ns, KvPageStore.cold());
            long pageBytes = new JlamaKvPageLayout(spec.layers(), spec.kvWidth(), ConversationDemo.PAGE_TOKENS).pageBytes();
            ConversationDemo.Engine engine = new ConversationDemo.Engine(ns, pageBytes, "demo-engine", cold::run,
                    store -> new JlamaSessionRunner(warmModel, ns, store)::run,
                    new ConversationDemo.Vocab(ByteFallbackVocab::encode, ByteFallbackVocab::encodeContinuation), false);
            return ConversationDemo.run(engine, work.resolve("manager"), out);
        } finally {
            warmModel.close();
            coldModel.close();
        }
    }
}
