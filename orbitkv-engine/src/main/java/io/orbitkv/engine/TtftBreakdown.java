package io.orbitkv.engine;

/**
 * Where one request's time to first token went, measured inside the runner with
 * {@link System#nanoTime()} around each step; the rest of the TTFT (page keys, buffer setup,
 * sampling) is {@code ttftNanos - } {@link #measuredNanos()}.
 *
 * <p>Immutable value; every field is {@code >= 0}, 0 for a step the request did not take.
 *
 * @param lookupNanos  the store's prefix lookup: QUERY, waiting for it to settle, mapping the leases
 * @param copyNanos    copying the leased images out (llama.cpp: assembling the state blob;
 *                     Jlama: straight into the KV buffer)
 * @param importNanos  the engine's own import call (llama.cpp {@code llama_state_seq_set_data}; Jlama none)
 * @param releaseNanos ending the lease (RELEASE, or only sending it when the store pipelines it)
 * @param prefillNanos the prefill batch of the tokens not restored, up to the first token's logits
 */
public record TtftBreakdown(long lookupNanos, long copyNanos, long importNanos, long releaseNanos, long prefillNanos) {

    /** A request that restored nothing and whose prefill was not timed. */
    public static final TtftBreakdown NONE = new TtftBreakdown(0, 0, 0, 0, 0);

    public TtftBreakdown {
        if (lookupNanos < 0 || copyNanos < 0 || importNanos < 0 || releaseNanos < 0 || prefillNanos < 0) {
            throw new IllegalArgumentException("negative step time");
        }
    }

    /** The sum of the measured steps. */
    public long measuredNanos() {
        return lookupNanos + copyNanos + importNanos + releaseNanos + prefillNanos;
    }

    /** This breakdown with {@code nanos} as the prefill time. */
    public TtftBreakdown withPrefill(long nanos) {
        return new TtftBreakdown(lookupNanos, copyNanos, importNanos, releaseNanos, nanos);
    }
}
