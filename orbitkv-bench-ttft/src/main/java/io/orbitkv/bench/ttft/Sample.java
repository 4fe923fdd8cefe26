package io.orbitkv.bench.ttft;

import io.orbitkv.engine.HitSource;
import io.orbitkv.engine.RequestReport;

/**
 * One measured request: which engine and arm served which turn, and what its report said.
 *
 * <p>Immutable value. {@code ttftNanos} is from request arrival (the {@code nanoTime} taken just
 * before the runner is called) to the first generated token, as {@link RequestReport#ttftNanos()}.
 */
record Sample(String engine, Arm arm, int session, int turn, int promptTokens, int prefilledTokens,
              int restoredTokens, long restoredBytes, HitSource source, long ttftNanos) {

    static Sample of(String engine, Arm arm, int session, int turn, RequestReport r) {
        return new Sample(engine, arm, session, turn, r.promptTokens(), r.prefilledTokens(), r.restoredTokens(),
                r.restoredBytes(), r.source(), r.ttftNanos());
    }

    double ttftMillis() {
        return ttftNanos / 1e6;
    }

    String csv() {
        return String.join(",", engine, arm.name(), Integer.toString(session), Integer.toString(turn + 1),
                Integer.toString(promptTokens), Integer.toString(prefilledTokens), Integer.toString(restoredTokens),
                Long.toString(restoredBytes), source.name(), Long.toString(ttftNanos));
    }

    static final String CSV_HEADER =
            "engine,arm,session,turn,prompt_tokens,prefilled_tokens,restored_tokens,restored_bytes,source,ttft_ns";
}
