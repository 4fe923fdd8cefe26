package io.orbitkv.testkit;

import org.junit.jupiter.api.Assumptions;

/**
 * What a test needs from the machine (a binary such as etcd or openssl, root for a mount, a
 * kernel feature), checked in one place so that CI cannot be green by accident.
 *
 * <p>On a developer's machine a missing requirement skips the test, as JUnit's assumptions do.
 * Under the switch {@value #SWITCH} (environment variable, set by {@code .ci/run}) or the system
 * property {@value #PROPERTY} = {@code true}, it fails the test instead, naming what is missing:
 * CI installs everything, so a requirement missing there is a broken CI, not a reason to skip.
 *
 * <p>Stateless; thread-safe.
 */
public final class Environment {

    /** The environment variable that turns missing requirements into failures. */
    public static final String SWITCH = "ORBITKV_REQUIRE_ENVIRONMENT";
    /** The system property with the same meaning (for a single Maven run). */
    public static final String PROPERTY = "orbitkv.requireEnvironment";

    private Environment() {}

    /** True when missing requirements fail instead of skipping. */
    public static boolean strict() {
        String env = System.getenv(SWITCH);
        return (env != null && !env.isBlank() && !env.equals("0")) || Boolean.getBoolean(PROPERTY);
    }

    /**
     * Returns when {@code present}; otherwise skips the calling test, or fails it under the switch.
     *
     * @param what the requirement in words, e.g. "etcd at /usr/bin/etcd (Debian etcd-server)"
     */
    public static void require(boolean present, String what) {
        if (present) return;
        if (strict()) {
            throw new AssertionError("missing requirement: " + what + " (" + SWITCH
                    + " is set, so this test fails instead of skipping; install it, or unset the switch)");
        }
        Assumptions.abort("missing requirement: " + what);
    }
}
