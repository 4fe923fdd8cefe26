package io.orbitkv.bench.ttft;

import io.orbitkv.engine.HitSource;
import io.orbitkv.engine.RequestReport;
import io.orbitkv.engine.TtftBreakdown;

/**
 * One measured request: which engine and arm served which turn, and what its report said.
 *
 * <p>Immutable value. {@code ttftNanos} is from request arrival (the {@code nanoTime} taken just
 * before the runner is called) to the first generated token, as {@link RequestReport#ttftNanos()};
 * {@code breakdown} is the runner's own split of it ({@link RequestReport#breakdown()}).
 */
record Sample(String engine, Arm arm, int session, int turn, int promptTokens, int prefilledTokens,
              int restoredTokens, long restoredBytes, HitSource source, long ttftNanos, TtftBreakdown breakdown) {

    /** A sample without a step breakdown. */
    Sample(String engine, Arm arm, int session, int turn, int promptTokens, int prefilledTokens, int restoredTokens,
           long restoredBytes, HitSource source, long ttftNanos) {
        this(engine, arm, session, turn, promptTokens, prefilledTokens, restoredTokens, restoredBytes, source, ttftNanos,
                TtftBreakdown.NONE);
    }

    static Sample of(String engine, Arm arm, int session, int turn, RequestReport r) {
        return new Sample(engine, arm, session, turn, r.promptTokens(), r.prefilledTokens(), r.restoredTokens(),
                r.restoredBytes(), r.source(), r.ttftNanos(), r.breakdown());
    }

    double ttftMillis() {
        return ttftNanos / 1e6;
    }

    String csv() {
        return String.join(",", engine, arm.name(), Integer.toString(session), Integer.toString(turn + 1),
                Integer.toString(promptTokens), Integer.toString(prefilledTokens), Integer.toString(restoredTokens),
                Long.toString(restoredBytes), source.name(), Long.toString(ttftNanos),
                Long.toString(breakdown.lookupNanos()), Long.toString(breakdown.copyNanos()),
                Long.toString(breakdown.importNanos()), Long.toString(breakdown.releaseNanos()),
                Long.toString(breakdown.prefillNanos()));
    }

    static final String CSV_HEADER = "engine,arm,session,turn,prompt_tokens,prefilled_tokens,restored_tokens,restored_bytes,"
            + "source,ttft_ns,lookup_ns,copy_ns,import_ns,release_ns,prefill_ns";
}
