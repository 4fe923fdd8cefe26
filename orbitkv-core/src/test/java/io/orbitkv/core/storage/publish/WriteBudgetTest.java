package io.orbitkv.core.storage.publish;

import org.junit.jupiter.api.Test;

import static io.orbitkv.core.storage.publish.WriteBudget.Admission.ADMITTED;
import static io.orbitkv.core.storage.publish.WriteBudget.Admission.OVER_RATE;
import static io.orbitkv.core.storage.publish.WriteBudget.Admission.QUEUE_FULL;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class WriteBudgetTest {

    private static final long MIB = 1 << 20;
    private static final long SECOND = 1_000_000_000L;

    @Test
    void rateRefillsWithInjectedTime() {
        // 10 MiB/s, 4 MiB burst, 100 MiB queue.
        WriteBudget b = new WriteBudget(10 * MIB, 4 * MIB, 100 * MIB, 0);
        assertThat(b.tryAdmit(2 * MIB, 0)).isEqualTo(ADMITTED);
        assertThat(b.tryAdmit(2 * MIB, 0)).isEqualTo(ADMITTED);
        assertThat(b.tryAdmit(2 * MIB, 0)).isEqualTo(OVER_RATE);
        // 100 ms later: 1 MiB refilled, still short of 2 MiB.
        assertThat(b.tryAdmit(2 * MIB, SECOND / 10)).isEqualTo(OVER_RATE);
        // 200 ms later: 2 MiB refilled.
        assertThat(b.tryAdmit(2 * MIB, SECOND / 5)).isEqualTo(ADMITTED);
        assertThat(b.queuedBytes()).isEqualTo(6 * MIB);
    }

    @Test
    void queueBoundIsIndependentOfRate() {
        WriteBudget b = new WriteBudget(Long.MAX_VALUE, 64 * MIB, 4 * MIB, 0);
        assertThat(b.tryAdmit(3 * MIB, 0)).isEqualTo(ADMITTED);
        assertThat(b.tryAdmit(2 * MIB, 1)).isEqualTo(QUEUE_FULL);
        b.onDequeued(3 * MIB);
        assertThat(b.queuedBytes()).isZero();
        assertThat(b.tryAdmit(2 * MIB, 2)).isEqualTo(ADMITTED);
    }

    @Test
    void aBlockLargerThanTheBurstPassesWhenTheBucketIsFull() {
        WriteBudget b = new WriteBudget(MIB, MIB, 100 * MIB, 0);
        assertThat(b.tryAdmit(2 * MIB, 0)).isEqualTo(ADMITTED);
        // The bucket went negative: the next block waits for the debt to be repaid.
        assertThat(b.tryAdmit(MIB / 2, SECOND / 2)).isEqualTo(OVER_RATE);
        assertThat(b.tryAdmit(MIB / 2, 2 * SECOND)).isEqualTo(ADMITTED);
    }

    @Test
    void rejectsNonPositiveBounds() {
        assertThatThrownBy(() -> new WriteBudget(0, 1, 1, 0)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void policiesParse() {
        assertThat(SsdAdmissionPolicy.parse("write-through")).isEqualTo(new SsdAdmissionPolicy.WriteThrough());
        assertThat(SsdAdmissionPolicy.parse("on-evict")).isEqualTo(new SsdAdmissionPolicy.OnEvict());
        assertThat(SsdAdmissionPolicy.parse("reuse-aware:3")).isEqualTo(new SsdAdmissionPolicy.ReuseAware(3));
        assertThatThrownBy(() -> SsdAdmissionPolicy.parse("sometimes"))
                .hasMessageContaining("unknown SSD admission policy");
        assertThatThrownBy(() -> SsdAdmissionPolicy.parse("reuse-aware:0"))
                .isInstanceOf(IllegalArgumentException.class);
    }
}
