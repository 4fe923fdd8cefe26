package io.orbitkv.testkit;

import java.util.concurrent.ThreadLocalRandom;

/**
 * The one seed of every randomized test: {@code -Dorbitkv.seed=N} fixes it; without it, each test
 * JVM draws one at start and uses it throughout, so two runs explore different schedules and any
 * failure can be replayed exactly.
 *
 * <p>A test that calls {@link #get()} has the seed and the command to rerun added to its failure
 * message by {@link SeedInFailures} (registered for every test through JUnit's extension
 * auto-detection); a test may also put {@link #describe()} in its own messages.
 *
 * <p>Thread-safe: the seed is fixed at class initialization; the "used" mark is a volatile flag
 * that {@link SeedInFailures} resets before each test.
 */
public final class TestSeed {

    /** The system property that fixes the seed. */
    public static final String PROPERTY = "orbitkv.seed";

    private static final long SEED = initial();
    private static volatile boolean used;

    private TestSeed() {}

    private static long initial() {
        String fixed = System.getProperty(PROPERTY);
        if (fixed == null || fixed.isBlank()) return ThreadLocalRandom.current().nextLong();
        try {
            return Long.decode(fixed.strip());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("-D" + PROPERTY + " wants a long (decimal or 0x hex), got '" + fixed + "'", e);
        }
    }

    /** This JVM's seed; marks the running test as randomized. */
    public static long get() {
        used = true;
        return SEED;
    }

    /** "seed N (rerun with -Dorbitkv.seed=N)". */
    public static String describe() {
        return "seed " + SEED + " (rerun with -D" + PROPERTY + "=" + SEED + ")";
    }

    static boolean takeUsed() {
        boolean u = used;
        used = false;
        return u;
    }

    static void reset() {
        used = false;
    }
}
