package io.orbitkv.state;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The retention rule ({@link RecoveryContract#retainedRanges}): a page is kept iff some legal
 * boundary of the chain can read it; checked exhaustively against {@link RecoveryContract#requiredRanges}.
 */
class RetainedRangesTest {

    static final int P = 4;

    @Test
    void aHybridWindowKeepsOnlyTheWindowsBeforeCheckpointsAndTheSinks() {
        RecoveryContract c = new RecoveryContract(16, List.of(new StateGroup.SlidingWindow(0, 64, 4), new StateGroup.Recurrent(1)));
        assertThat(c.retainedRanges(0, 300, List.of(64L, 256L)))
                .containsExactly(new PageRange(0, 4), new PageRange(12, 16));
        assertThat(c.retainedRanges(0, 300, List.of())).as("no checkpoint: no legal boundary, nothing to keep").isEmpty();
        assertThat(c.retainedRanges(0, 200, List.of(64L, 256L))).as("a checkpoint past the chain's pages counts not")
                .containsExactly(new PageRange(0, 4));
    }

    @Test
    void withoutARecurrentGroupEveryPageOfTheChainIsKept() {
        RecoveryContract c = new RecoveryContract(16, List.of(new StateGroup.SlidingWindow(0, 32, 0)));
        assertThat(c.retainedRanges(0, 100, List.of())).containsExactly(new PageRange(0, 6));
        RecoveryContract full = new RecoveryContract(16, List.of(new StateGroup.Full(0), new StateGroup.Recurrent(1)));
        assertThat(full.retainedRanges(0, 100, List.of(32L, 64L))).containsExactly(new PageRange(0, 4));
    }

    /** Windows 1..24, sinks 0..9, every subset of checkpoints among 6 boundaries: kept == union of what they read. */
    @Test
    void keptIsExactlyWhatTheLegalBoundariesRead_exhaustively() {
        int checked = 0;
        for (int window = 1; window <= 24; window++) {
            for (int sink = 0; sink <= 9; sink++) {
                RecoveryContract c = new RecoveryContract(P, List.of(new StateGroup.SlidingWindow(0, window, sink), new StateGroup.Recurrent(1)));
                for (int mask = 0; mask < 64; mask++) {
                    List<Long> checkpoints = new ArrayList<>();
                    for (int b = 0; b < 6; b++) if ((mask & (1 << b)) != 0) checkpoints.add((long) (b + 1) * P);
                    boolean[] expected = new boolean[6];
                    for (long t : checkpoints) {
                        Requirement.Pages r = (Requirement.Pages) c.requiredRanges(t, 0).getFirst();
                        for (PageRange range : r.ranges()) for (long p = range.startPage(); p < range.endPage(); p++) expected[(int) p] = true;
                    }
                    boolean[] kept = new boolean[6];
                    for (PageRange range : c.retainedRanges(0, 6 * P + 1, checkpoints)) {
                        for (long p = range.startPage(); p < range.endPage(); p++) kept[(int) p] = true;
                    }
                    assertThat(kept).as("W=%d S=%d checkpoints %s", window, sink, checkpoints).isEqualTo(expected);
                    checked++;
                }
            }
        }
        assertThat(checked).isEqualTo(24 * 10 * 64);
    }

    @Test
    void badInputIsRefused() {
        RecoveryContract c = new RecoveryContract(16, List.of(new StateGroup.Full(0), new StateGroup.Recurrent(1)));
        assertThatThrownBy(() -> c.retainedRanges(1, 64, List.of())).hasMessageContaining("recurrent");
        assertThatThrownBy(() -> c.retainedRanges(2, 64, List.of())).hasMessageContaining("no group");
        assertThatThrownBy(() -> c.retainedRanges(0, 64, List.of(20L))).hasMessageContaining("multiple");
    }
}
