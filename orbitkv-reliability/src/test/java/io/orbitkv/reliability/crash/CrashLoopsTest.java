package io.orbitkv.reliability.crash;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.testkit.ProcessTest;
import io.orbitkv.testkit.TestSeed;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * A slice of {@code bin/reliability crash}: 3 Manager SIGKILLs under write-through publishing and
 * 3 client SIGKILLs (mid-publish, mid-lease, mid-restore), against real Manager processes.
 */
@ProcessTest
class CrashLoopsTest {

    @TempDir
    Path dir;

    @Test
    void managersKilledUnderPublishServeNoCorruptPageAndKilledClientsLeakNothing() throws Exception {
        CrashLoops loops = new CrashLoops();
        new CommandLine(loops).parseArgs("--rounds", "3", "--client-rounds", "3", "--preload", "512");

        CrashLoops.Result r = loops.loops(dir, TestSeed.get());

        assertThat(r.failures()).isEmpty();
        assertThat(r.managerRounds()).isEqualTo(3);
        assertThat(r.clientRounds()).isEqualTo(3);
        assertThat(r.pagesPublished()).as("publishing reached the Manager before each kill").isPositive();
        assertThat(r.pagesServed()).as("pages were read back after restarts, so the byte check ran").isPositive();
        assertThat(r.corruptPages()).isZero();
        assertThat(r.leaks()).isZero();
    }
}
