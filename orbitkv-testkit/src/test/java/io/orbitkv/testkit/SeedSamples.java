package io.orbitkv.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** Tests run by {@link SeedInFailuresTest} through the launcher (not by Surefire: no Test suffix). */
final class SeedSamples {

    static final class UsesTheSeed {
        @Test
        void fails() {
            long seed = TestSeed.get();
            assertThat(seed).as("a randomized check").isEqualTo(seed + 1);
        }
    }

    static final class IgnoresTheSeed {
        @Test
        void fails() {
            assertThat(1).as("a plain check").isEqualTo(2);
        }
    }
}
