package io.orbitkv.bench.ttft;

import io.orbitkv.engine.KvPageStore;
import io.orbitkv.engine.RequestReport;
import io.orbitkv.state.Namespace;

/**
 * An engine under test: a loaded model, the namespaces its arms register, and the measurements
 * the hit model needs from it.
 *
 * <p>Owns the loaded model (closed by {@link #close()}). Thread model: confined to the benchmark
 * thread; runners made by {@link #runner} share the model and are used one at a time.
 * Invariant: {@link #missNamespace()} differs from {@link #namespace()} only in its revision, so a
 * store registered with it sends the same QUERY shape for keys nothing was ever published under.
 */
sealed interface TtftEngine extends AutoCloseable permits JlamaTtftEngine, LlamaCppTtftEngine {

    /** Samples of {@link #stepNanos}; the median is reported. */
    int STEP_REPEATS = 7;

    String name();

    Namespace namespace();

    Namespace missNamespace();

    long pageBytes();

    int pageTokens();

    /** Prompt tokens a request always computes (Jlama 1, llama.cpp 2). */
    int minPrefillTokens();

    /** A session runner on this engine's model for {@code namespace}, reading and writing {@code store}. */
    Runner runner(Namespace namespace, KvPageStore store);

    /**
     * Median time of the runner's minimum compute step ({@link #minPrefillTokens()} prompt tokens
     * and the greedy pick of the first token) after {@code context} tokens: the "one decode step"
     * of the hit model, measured on this model in this run.
     */
    long stepNanos(int[] context);

    @Override
    void close();

    /** Serves one request; see the engine runners' {@code run}. */
    @FunctionalInterface
    interface Runner {
        RequestReport run(int[] prompt, int newTokens, long arrivalNanos);
    }

    static long median(long[] values) {
        long[] sorted = values.clone();
        java.util.Arrays.sort(sorted);
        return sorted[sorted.length / 2];
    }
}
