package io.orbitkv.core.log;

import java.util.HashMap;
import java.util.Map;
import java.util.Objects;

/**
 * A log for background loops whose failures repeat at the loop's rate: per kind, the first
 * message of a window is written, the rest of that window only counted; the first message after
 * the window also says how many were suppressed ("N more like this in the last 10 s").
 *
 * <p>Owns one small map of kinds (bounded by {@link #MAX_KINDS}: kinds are fixed strings or peer
 * node ids, and a map at the bound is cleared rather than grown). Thread-safe: every method is
 * {@code synchronized} (callers are control-plane threads, at most a few thousand calls per
 * second). Time comes in as a parameter so tests drive the window.
 *
 * <p>Design note: a window of 10 s keeps a failing peer to 6 lines a minute per kind while the
 * first failure is seen at once; the counters in metrics carry the exact rates.
 */
public final class RateLimitedLog {

    /** Distinct kinds tracked at once. */
    public static final int MAX_KINDS = 1_024;

    private final System.Logger logger;
    private final long windowNanos;
    // @GuardedBy("this")
    private final Map<String, long[]> kinds = new HashMap<>(); // kind → {window start, suppressed}

    public RateLimitedLog(System.Logger logger, long windowNanos) {
        this.logger = Objects.requireNonNull(logger, "logger");
        if (windowNanos <= 0) throw new IllegalArgumentException("windowNanos: " + windowNanos);
        this.windowNanos = windowNanos;
    }

    /** A log named {@code name} with a 10 s window. */
    public static RateLimitedLog tenSeconds(String name) {
        return new RateLimitedLog(System.getLogger(name), 10_000_000_000L);
    }

    /**
     * Writes {@code message} at {@code level} unless a message of {@code kind} was written less
     * than a window ago (then it is only counted).
     *
     * @return the line written, or null when it was suppressed
     */
    public synchronized String log(System.Logger.Level level, String kind, String message, long nowNanos) {
        long[] state = kinds.get(kind);
        if (state != null && nowNanos - state[0] < windowNanos) {
            state[1]++;
            return null;
        }
        String line = message;
        if (state != null && state[1] > 0) {
            line += " (" + state[1] + " more like this in the last " + windowNanos / 1_000_000_000L + " s)";
        }
        if (state == null) {
            if (kinds.size() >= MAX_KINDS) kinds.clear();
            state = new long[2];
            kinds.put(kind, state);
        }
        state[0] = nowNanos;
        state[1] = 0;
        logger.log(level, line);
        return line;
    }

    /** {@link #log(System.Logger.Level, String, String, long)} now. */
    public String log(System.Logger.Level level, String kind, String message) {
        return log(level, kind, message, System.nanoTime());
    }
}
