package io.orbitkv.bench.serve;

import java.util.Objects;

/**
 * One request of the serving workload.
 *
 * <p>Immutable value (the prompt array is not copied: the workload builds it once and nobody
 * writes it). {@code arrivalOffsetNanos} is on the workload's unit-rate clock: the run scales it
 * by its arrival rate (synthetic) or takes it as is (a trace's timestamps).
 *
 * @param id                  index in the workload, the same in every arm and concurrency
 * @param kind                {@code turn}, {@code branch} or {@code trace}
 * @param affinity            what the router hashes to pick the engine (the session; a trace's first block)
 * @param prompt              token ids, BOS first
 * @param newTokens           greedy tokens to generate
 * @param cancelAt            where the client goes away, or {@link CancelAt#NONE}
 * @param arrivalOffsetNanos  arrival after the run's start
 */
record ServeRequest(int id, String kind, long affinity, int[] prompt, int newTokens, CancelAt cancelAt,
                    long arrivalOffsetNanos) {

    ServeRequest {
        Objects.requireNonNull(kind, "kind");
        Objects.requireNonNull(prompt, "prompt");
        Objects.requireNonNull(cancelAt, "cancelAt");
        if (prompt.length < 1 || newTokens < 1 || arrivalOffsetNanos < 0) {
            throw new IllegalArgumentException("request " + id + ": empty prompt, no new token or negative arrival");
        }
    }

    /** Where a cancelled request's client goes away. */
    enum CancelAt {
        NONE,
        /** While the leased prefix is about to be restored (a request that leased nothing runs to its prefill). */
        RESTORE,
        /** At the end of the prefill batch, before the first token. */
        PREFILL
    }
}
