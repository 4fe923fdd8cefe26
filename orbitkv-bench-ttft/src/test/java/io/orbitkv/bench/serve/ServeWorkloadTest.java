package io.orbitkv.bench.serve;

import io.orbitkv.bench.trace.TraceRequest;
import io.orbitkv.testkit.TestSeed;
import org.junit.jupiter.api.Test;

import java.util.Arrays;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/** The serving workload's shape: sharing, branches, cancels, arrivals and the trace scaling. */
class ServeWorkloadTest {

    private static int commonPrefix(int[] a, int[] b) {
        int n = Math.min(a.length, b.length);
        int i = 0;
        while (i < n && a[i] == b[i]) i++;
        return i;
    }

    @Test
    void sessionsShareTheirGroupsSystemPrompt_turnsExtendTheirPrevious_branchesReuseOnlyAPrefix() {
        long seed = TestSeed.get();
        ServeWorkload.Shape shape = new ServeWorkload.Shape("t", 2, 6, 3, 40, 10, 6, 2, 0.5, 0.1, seed);
        List<ServeRequest> w = ServeWorkload.synthetic(shape);
        assertThat(ServeWorkload.synthetic(shape)).as("a pure function of the seed " + seed)
                .usingElementComparator((a, b) -> Arrays.equals(a.prompt(), b.prompt()) && a.arrivalOffsetNanos() == b.arrivalOffsetNanos()
                        && a.cancelAt() == b.cancelAt() ? 0 : 1).isEqualTo(w);
        List<ServeRequest> turns = w.stream().filter(r -> r.kind().equals("turn")).toList();
        assertThat(turns).hasSize(18);
        for (int i = 1; i < w.size(); i++) {
            assertThat(w.get(i).arrivalOffsetNanos()).isGreaterThan(w.get(i - 1).arrivalOffsetNanos());
            assertThat(w.get(i).id()).isEqualTo(i);
        }
        for (ServeRequest a : turns) {
            for (ServeRequest b : turns) {
                if (a.affinity() % 2 == b.affinity() % 2) assertThat(commonPrefix(a.prompt(), b.prompt())).isGreaterThanOrEqualTo(40);
                else assertThat(commonPrefix(a.prompt(), b.prompt())).isLessThan(40);
                if (a.affinity() == b.affinity() && a.prompt().length < b.prompt().length) {
                    assertThat(commonPrefix(a.prompt(), b.prompt())).as("a later turn extends an earlier one").isEqualTo(a.prompt().length);
                }
            }
        }
        for (ServeRequest branch : w.stream().filter(r -> r.kind().equals("branch")).toList()) {
            int longest = turns.stream().filter(t -> t.affinity() == branch.affinity())
                    .mapToInt(t -> commonPrefix(t.prompt(), branch.prompt())).max().orElseThrow();
            assertThat(longest).as("shares a prefix with its session").isGreaterThanOrEqualTo(40).isLessThan(branch.prompt().length);
        }
        assertThat(shape.maxContextTokens()).isEqualTo(w.stream().mapToInt(r -> r.prompt().length + r.newTokens()).max().orElseThrow());
    }

    @Test
    void aboutOneInTenIsCancelled_alternatelyAtRestoreAndPrefill() {
        ServeWorkload.Shape shape = new ServeWorkload.Shape("t", 3, 100, 4, 8, 2, 2, 1, 0.2, 0.1, TestSeed.get());
        List<ServeRequest> w = ServeWorkload.synthetic(shape);
        long restore = w.stream().filter(r -> r.cancelAt() == ServeRequest.CancelAt.RESTORE).count();
        long prefill = w.stream().filter(r -> r.cancelAt() == ServeRequest.CancelAt.PREFILL).count();
        assertThat((restore + prefill) / (double) w.size()).as("seed " + TestSeed.get()).isBetween(0.05, 0.15);
        assertThat(restore - prefill).isBetween(0L, 1L);
    }

    @Test
    void traceRecordsSharingLeadingBlocksSharePromptPrefixes_scaledToTheContext() {
        List<TraceRequest> records = List.of(new TraceRequest(1, 1000, 1500, 40, new long[] {7, 8, 9}),
                new TraceRequest(2, 1500, 1100, 400, new long[] {7, 8, 10}),
                new TraceRequest(3, 3000, 9000, 10, new long[] {11}));
        List<ServeRequest> w = ServeWorkload.trace(records, 16, 100, 8, 2.0, 0, 5);
        assertThat(w.get(0).prompt()).hasSize(47); // 1500 * 16/512 rounded, + nothing: BOS counted in the length
        assertThat(commonPrefix(w.get(0).prompt(), w.get(1).prompt())).isEqualTo(1 + 2 * 16);
        assertThat(w.get(2).prompt()).as("cut to the prompt cap").hasSize(100);
        assertThat(w.get(1).newTokens()).isEqualTo(8);
        assertThat(w.get(0).newTokens()).isEqualTo(1);
        assertThat(w.get(1).arrivalOffsetNanos()).isEqualTo(250_000_000L);
        assertThat(w.get(0).affinity()).isEqualTo(w.get(1).affinity());
    }
}
