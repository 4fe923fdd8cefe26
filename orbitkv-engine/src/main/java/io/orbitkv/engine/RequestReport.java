package io.orbitkv.engine;

import java.util.Objects;

/**
 * What one request of an engine session runner did, for the demo, the benchmark and the parity gates.
 *
 * <p>Immutable value (the arrays are the runner's fresh copies, not shared with it).
 *
 * @param generated       greedy tokens, in order
 * @param logits          raw logits of each generated step ({@code generated.length} rows of
 *                        vocabulary size), the evidence the parity gates compare bit for bit
 * @param promptTokens    prompt length
 * @param restoredTokens  prompt tokens restored from OrbitKV (a multiple of the page size)
 * @param prefilledTokens prompt tokens computed ({@code promptTokens - restoredTokens})
 * @param restoredBytes   page image bytes restored into the engine's KV cache
 * @param source          where the restored prefix came from
 * @param ttftNanos       nanoTime from request arrival to the first generated token
 * @param published       outcome of publishing the newly completed pages
 * @param breakdown       where the TTFT went, step by step ({@link TtftBreakdown#NONE} when not measured)
 */
public record RequestReport(int[] generated, float[][] logits, int promptTokens, int restoredTokens,
                            int prefilledTokens, long restoredBytes, HitSource source, long ttftNanos,
                            KvPageStore.PublishReport published, TtftBreakdown breakdown) {

    /** A report without a step breakdown. */
    public RequestReport(int[] generated, float[][] logits, int promptTokens, int restoredTokens, int prefilledTokens,
                         long restoredBytes, HitSource source, long ttftNanos, KvPageStore.PublishReport published) {
        this(generated, logits, promptTokens, restoredTokens, prefilledTokens, restoredBytes, source, ttftNanos,
                published, TtftBreakdown.NONE);
    }

    public RequestReport {
        Objects.requireNonNull(generated, "generated");
        Objects.requireNonNull(logits, "logits");
        Objects.requireNonNull(source, "source");
        Objects.requireNonNull(published, "published");
        Objects.requireNonNull(breakdown, "breakdown");
        if (logits.length != generated.length) throw new IllegalArgumentException("one logits row per token");
        if (restoredTokens + prefilledTokens != promptTokens || prefilledTokens < 1) {
            throw new IllegalArgumentException("restored " + restoredTokens + " + prefilled " + prefilledTokens
                    + " must be the prompt " + promptTokens + " with at least one token computed");
        }
        if ((restoredTokens == 0) != (source == HitSource.NONE)) {
            throw new IllegalArgumentException("source " + source + " with " + restoredTokens + " restored tokens");
        }
    }
}
