package io.orbitkv.core.engine;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.storage.dram.DramTier;
import io.orbitkv.core.storage.dram.DramTierConfig;
import io.orbitkv.core.storage.dram.Reservation;
import io.orbitkv.core.storage.dram.SizeClass;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.state.StateKey;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/** The quarantine alone, on a real DRAM tier, with the clock passed in. */
class PublishQuarantineTest {

    static final int SLOT = 32 * 1024;
    static final long GRACE = 5_000_000_000L;

    @TempDir
    Path dir;
    DramTier dram;

    @BeforeEach
    void open() throws IOException {
        dram = DramTier.open(new DramTierConfig(dir, "q", List.of(new SizeClass(SLOT, 8)), 4L * SLOT, 2L * SLOT, 16),
                new ResidencyStream(64), new SimpleMeterRegistry());
    }

    @AfterEach
    void close() {
        dram.close();
    }

    private Reservation reserve(long k) {
        byte[] key = new byte[32];
        key[0] = (byte) k;
        return (Reservation) dram.reserve(StateKey.ofBytes(key), 0, SLOT);
    }

    @Test
    void aSlotStaysReservedUntilItsGraceEndsThenGoesBack() {
        PublishQuarantine q = new PublishQuarantine(GRACE, 4L * SLOT, r -> SLOT, dram::abort);
        Reservation r = reserve(1);
        q.hold(r, 1_000);
        assertThat(q.onTick(1_000 + GRACE - 1)).isZero();
        assertThat(r.isOpen()).as("held, not freed").isTrue();
        assertThat(dram.usage().reservedBytes()).isEqualTo(SLOT);
        assertThat(q.heldBytes()).isEqualTo(SLOT);
        assertThat(q.onTick(1_000 + GRACE)).isEqualTo(1);
        assertThat(r.isOpen()).isFalse();
        assertThat(dram.usage().reservedBytes()).isZero();
        assertThat(q.heldBytes()).isZero();
        assertThat(q.onTick(Long.MAX_VALUE)).as("released exactly once").isZero();
    }

    @Test
    void aFullBudgetReleasesTheOldestEarlyAndCountsIt() {
        PublishQuarantine q = new PublishQuarantine(GRACE, 2L * SLOT, r -> SLOT, dram::abort);
        Reservation a = reserve(1);
        Reservation b = reserve(2);
        Reservation c = reserve(3);
        q.hold(a, 0);
        q.hold(b, 10);
        q.hold(c, 20);
        assertThat(a.isOpen()).as("oldest released to fit the budget").isFalse();
        assertThat(b.isOpen()).isTrue();
        assertThat(c.isOpen()).isTrue();
        assertThat(q.heldBytes()).isEqualTo(2L * SLOT);
        assertThat(q.releasedEarly()).isEqualTo(1);
        assertThat(q.onTick(10 + GRACE)).isEqualTo(1);
        assertThat(q.releaseAll()).isEqualTo(1);
        assertThat(dram.usage().reservedBytes()).isZero();
    }

    @Test
    void noGraceReleasesAtOnce() {
        PublishQuarantine q = new PublishQuarantine(0, 2L * SLOT, r -> SLOT, dram::abort);
        Reservation r = reserve(1);
        q.hold(r, 0);
        assertThat(r.isOpen()).isFalse();
        assertThat(q.heldSlots()).isZero();
        assertThat(q.releasedEarly()).isZero();
    }
}
