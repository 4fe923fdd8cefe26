package io.orbitkv.client;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class PeerWaitTest {

    @Test
    void theWaitIsTheRecomputeTimeAtTheMeasuredRateWithinItsBounds() {
        assertThat(PeerWait.millisFor(3_000, 1_500)).isEqualTo(2_000);
        assertThat(PeerWait.millisFor(1, 1_500)).as("rounded up").isEqualTo(1);
        assertThat(PeerWait.millisFor(0, 1_500)).as("at least 1 ms").isEqualTo(1);
        assertThat(PeerWait.millisFor(1_000_000_000L, 1)).isEqualTo(PeerWait.MAX_MILLIS);
        assertThat(PeerWait.millisFor(4_096, 0)).as("rate unknown").isEqualTo(PeerWait.UNKNOWN_RATE_MILLIS);
        assertThatThrownBy(() -> PeerWait.millisFor(-1, 10)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> PeerWait.millisFor(1, -1)).isInstanceOf(IllegalArgumentException.class);
    }
}
