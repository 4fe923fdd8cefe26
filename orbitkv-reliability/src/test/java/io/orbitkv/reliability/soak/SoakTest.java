package io.orbitkv.reliability.soak;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.testkit.ProcessTest;
import io.orbitkv.testkit.TestSeed;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * {@code bin/reliability soak --minutes 1}: 16 clients against a Manager process for a minute in
 * 10 s periods, the first two warm-up, so the growth and p99 rules are still checked on four.
 */
@ProcessTest
class SoakTest {

    @TempDir
    Path dir;

    @Test
    void aMinuteOfSixteenClientsKeepsHeapRssAndP99SteadyAndEveryByteRight() throws Exception {
        Soak soak = new Soak();
        new CommandLine(soak).parseArgs("--minutes", "1", "--clients", "16", "--sample-seconds", "10", "--warmup-periods", "2");

        Soak.Result r = soak.soak(dir, TestSeed.get());

        assertThat(r.failures()).isEmpty();
        assertThat(r.periods()).hasSize(6);
        assertThat(r.bytesChecked()).as("served pages were checked").isPositive();
        assertThat(r.periods().getLast().queries()).isPositive();
        assertThat(r.periods().getLast().restores()).isPositive();
    }
}
