package io.orbitkv.client;

/**
 * How long a QUERY may let a clustered Manager wait for peers ({@code peer_wait_millis},
 * docs/protocol.md 5.3): the time recomputing the prompt would take at the engine's measured
 * prefill rate, since waiting longer than that for a peer's pages cannot make the first token
 * sooner than computing them. Stateless.
 *
 * <p>Design note: the bound is the whole recompute time, not a fraction of it, because the
 * Manager settles as soon as the fetch lands (a 64-page peer prefix settles in milliseconds on a
 * LAN) and only a slow or dead peer runs into the bound; then the engine has lost at most the
 * time it would have spent computing anyway. An engine that has not measured its rate yet waits
 * {@link #UNKNOWN_RATE_MILLIS}, and no engine waits more than {@link #MAX_MILLIS} (the Manager caps
 * the wait again with its own maximum).
 */
public final class PeerWait {

    /** The wait of an engine that has not measured its prefill rate yet. */
    public static final int UNKNOWN_RATE_MILLIS = 2_000;
    /** The longest wait this helper ever asks for. */
    public static final int MAX_MILLIS = 10_000;

    private PeerWait() {
    }

    /**
     * The wait bound for a QUERY whose prompt needs {@code tokensToCompute} tokens of prefill
     * without a hit, at {@code prefillTokensPerSecond} (0 = unknown): at least 1 ms, at most
     * {@link #MAX_MILLIS}.
     */
    public static int millisFor(long tokensToCompute, int prefillTokensPerSecond) {
        if (tokensToCompute < 0) throw new IllegalArgumentException("tokensToCompute must be >= 0: " + tokensToCompute);
        if (prefillTokensPerSecond < 0) throw new IllegalArgumentException("prefill rate must be >= 0: " + prefillTokensPerSecond);
        if (prefillTokensPerSecond == 0) return UNKNOWN_RATE_MILLIS;
        long millis = (tokensToCompute * 1000 + prefillTokensPerSecond - 1) / prefillTokensPerSecond;
        return (int) Math.max(1, Math.min(MAX_MILLIS, millis));
    }
}
