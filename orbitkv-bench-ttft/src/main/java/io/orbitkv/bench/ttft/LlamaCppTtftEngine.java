package io.orbitkv.bench.ttft;

import io.orbitkv.engine.KvPageStore;
import io.orbitkv.llamacpp.LlamaCppEngine;
import io.orbitkv.llamacpp.LlamaCppKvPageLayout;
import io.orbitkv.llamacpp.LlamaCppNamespace;
import io.orbitkv.llamacpp.LlamaCppSessionRunner;
import io.orbitkv.state.Namespace;
import io.orbitkv.testmodel.TinyLlamaModel;

/**
 * llama.cpp under the TTFT benchmark: one context shared by every arm's
 * {@link LlamaCppSessionRunner} (each request clears its KV cache first).
 *
 * <p>Owns the llama.cpp model and context. Thread model: confined; llama.cpp runs
 * {@code threads} threads inside each decode.
 *
 * <p>Design note: {@code threads} is 1 in {@code bin/bench-ttft}: with 2 threads on this machine's
 * 2 cores shared with other jobs (load average 12-13), llama.cpp's spinning worker threads were
 * descheduled and single requests took 1.3-2.3 s instead of 2-50 ms; one thread keeps the
 * arms comparable. Jlama's pool uses both cores.
 */
final class LlamaCppTtftEngine implements TtftEngine {

    private final LlamaCppEngine engine;
    private final Namespace namespace;
    private final Namespace missNamespace;
    private final LlamaCppKvPageLayout layout;

    private LlamaCppTtftEngine(LlamaCppEngine engine, Namespace namespace, Namespace missNamespace,
                               LlamaCppKvPageLayout layout) {
        this.engine = engine;
        this.namespace = namespace;
        this.missNamespace = missNamespace;
        this.layout = layout;
    }

    static LlamaCppTtftEngine load(TinyLlamaModel files, int pageTokens, int contextTokens, int threads) {
        LlamaCppEngine engine = LlamaCppEngine.load(files.ggufFile(), new LlamaCppEngine.Settings(contextTokens, threads));
        try {
            LlamaCppKvPageLayout layout = LlamaCppSessionRunner.layout(engine, pageTokens);
            Namespace ns = LlamaCppNamespace.of(files, layout);
            Namespace miss = LlamaCppNamespace.of(files.spec().name(), ns.revision() + "-miss-probe",
                    files.weightsDigestHex(), files.tokenizerDigestHex(), layout);
            return new LlamaCppTtftEngine(engine, ns, miss, layout);
        } catch (RuntimeException e) {
            engine.close();
            throw e;
        }
    }

    @Override
    public String name() {
        return "llama.cpp";
    }

    @Override
    public Namespace namespace() {
        return namespace;
    }

    @Override
    public Namespace missNamespace() {
        return missNamespace;
    }

    @Override
    public long pageBytes() {
        return layout.pageBytes();
    }

    @Override
    public int pageTokens() {
        return layout.pageTokens();
    }

    @Override
    public int minPrefillTokens() {
        return LlamaCppSessionRunner.MIN_PREFILL_TOKENS;
    }

    @Override
    public Runner runner(Namespace ns, KvPageStore store) {
        return new LlamaCppSessionRunner(engine, ns, store)::run;
    }

    /** A two-token batch at the next positions (the runner's minimum prefill) and its logits row copied out. */
    @Override
    public long stepNanos(int[] context) {
        long[] nanos = new long[STEP_REPEATS];
        engine.clear();
        engine.decode(context, 0, context.length);
        int[] two = new int[2];
        for (int r = 0; r < nanos.length; r++) {
            two[0] = context[2 * r];
            two[1] = context[2 * r + 1];
            long t0 = System.nanoTime();
            engine.decode(two, 0, 2);
            nanos[r] = System.nanoTime() - t0;
        }
        engine.clear();
        return TtftEngine.median(nanos);
    }

    @Override
    public void close() {
        engine.close();
    }
}
