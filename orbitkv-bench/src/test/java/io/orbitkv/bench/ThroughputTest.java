package io.orbitkv.bench;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ThroughputTest {

    @Test
    void roundsAlternateWhichSideRunsFirst() {
        List<String> order = new ArrayList<>();
        Throughput.pairedRounds(() -> {
            order.add("s");
            return 1;
        }, () -> {
            order.add("b");
            return 1;
        }, 4);
        assertThat(order).containsExactly("s", "b", "b", "s", "s", "b", "b", "s");
    }

    @Test
    void ratioIsTheMedianOfPerRoundRatiosNotTheRatioOfMedians() {
        double[] subject = {1, 4, 9};
        double[] baseline = {2, 2, 10};
        int[] i = {0, 0};
        Throughput.Paired p = Throughput.pairedRounds(() -> subject[i[0]++], () -> baseline[i[1]++], 3);
        // per-round ratios 0.5, 2.0, 0.9 -> median 0.9; medians of the sides are 4 and 2.
        assertThat(p.ratio()).isEqualTo(0.9);
        assertThat(p.subjectRate()).isEqualTo(4);
        assertThat(p.baselineRate()).isEqualTo(2);
        assertThat(p.rounds()).isEqualTo(3);
    }

    @Test
    void everyBaselineRunsInEveryRoundInAlternatingOrder() {
        List<String> order = new ArrayList<>();
        double[] rates = {2, 4};
        List<java.util.function.DoubleSupplier> baselines = List.of(() -> {
            order.add("a");
            return rates[0];
        }, () -> {
            order.add("b");
            return rates[1];
        });
        List<Throughput.Paired> each = Throughput.pairedRoundsAgainstEach(() -> {
            order.add("s");
            return 1;
        }, baselines, 2);
        assertThat(order).containsExactly("s", "a", "b", "b", "a", "s");
        assertThat(each).extracting(Throughput.Paired::baselineRate).containsExactly(2.0, 4.0);
        assertThat(each).extracting(Throughput.Paired::ratio).containsExactly(0.5, 0.25);
        assertThat(each).extracting(Throughput.Paired::subjectRate).containsOnly(1.0);
    }

    @Test
    void opLevelPairingCountsBytesOfBothSidesAfterWarmup() {
        long[] calls = {0, 0};
        Throughput.Paired p = Throughput.paired(() -> {
            calls[0]++;
            return 100;
        }, () -> {
            calls[1]++;
            return 100;
        }, 5, 10, 3);
        assertThat(calls).containsExactly(5 + 30, 5 + 30);
        assertThat(p.subjectRate()).isPositive();
        assertThat(p.baselineRate()).isPositive();
    }

    @Test
    void medianOfEvenAndOddLengthsLeavesTheInputAlone() {
        double[] odd = {5, 1, 3};
        assertThat(Throughput.median(odd)).isEqualTo(3);
        assertThat(odd).containsExactly(5, 1, 3);
        assertThat(Throughput.median(new double[] {4, 1, 3, 2})).isEqualTo(2.5);
        assertThatThrownBy(() -> Throughput.median(new double[0])).isInstanceOf(IllegalArgumentException.class);
    }
}
