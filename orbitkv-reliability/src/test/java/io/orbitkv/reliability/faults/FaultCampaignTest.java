package io.orbitkv.reliability.faults;

import io.orbitkv.testkit.StressTest;
import io.orbitkv.testkit.TestSeed;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.logging.Level;
import java.util.logging.Logger;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The CI slice of the fault simulation: 500 seeded schedules against the real Manager core, a
 * third of them with a peer Manager behind a faulty transport (a full run is
 * {@code bin/reliability faults}, 10,000). Seeded by {@link TestSeed}; a failure names each
 * failing schedule's seed and the command that replays it.
 */
@StressTest
class FaultCampaignTest {

    static final int SLICE = 500;
    /** Held so the level sticks (loggers are weakly referenced); as the CLI without --verbose. */
    private static final Logger ORBITKV = Logger.getLogger("io.orbitkv");
    private static Level before;

    @BeforeAll
    static void quiet() {
        // Each injected fault makes the store log what it logs for a failing disk: thousands of lines.
        before = ORBITKV.getLevel();
        ORBITKV.setLevel(Level.OFF);
    }

    @AfterAll
    static void restore() {
        ORBITKV.setLevel(before);
    }

    @Test
    void aSliceOfSchedulesServesNoWrongByteAndLeavesNothingHeld() {
        long seed = TestSeed.get();
        ByteArrayOutputStream log = new ByteArrayOutputStream();
        FaultCampaign.Summary s = FaultCampaign.run(SLICE, seed, 2, new PrintStream(log, true, StandardCharsets.UTF_8));
        String report = log.toString(StandardCharsets.UTF_8);
        System.out.print(report);
        assertThat(s.failures()).as("failing schedules (base seed %d):%n%s", seed, report).isEmpty();
        assertThat(s.schedules()).isEqualTo(SLICE);
        // The slice reached every device, network, client and peer fault it can inject.
        for (FaultKind k : FaultKind.values()) {
            assertThat(s.faults().get(k)).as("%s injected (base seed %d)", k, seed).isPositive();
        }
    }

    @Test
    void aScheduleReplaysFromItsSeed() {
        long seed = TestSeed.get();
        PrintStream quiet = new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8);
        FaultCampaign.Summary first = FaultCampaign.run(1, seed, 1, quiet);
        FaultCampaign.Summary again = FaultCampaign.run(1, seed, 1, quiet);
        assertThat(again.steps()).isEqualTo(first.steps());
        assertThat(again.faults()).as("the same faults from the same seed %d", seed).isEqualTo(first.faults());
    }

    @Test
    void aClusteredScheduleReplaysWithTheSameNetworkFaults() {
        long seed = TestSeed.get();
        // a third of the seeds are clustered, three quarters of those with a faulty network
        while (!Schedule.clusteredWithPeerFaults(seed)) seed++;
        PrintStream quiet = new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8);
        FaultCampaign.Summary first = FaultCampaign.run(1, seed, 1, quiet);
        FaultCampaign.Summary again = FaultCampaign.run(1, seed, 1, quiet);
        assertThat(first.failures()).as("seed %d", seed).isEmpty();
        assertThat(again.steps()).isEqualTo(first.steps());
        assertThat(again.faults()).as("the same faults from the same clustered seed %d", seed).isEqualTo(first.faults());
    }
}
