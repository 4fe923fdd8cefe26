package io.orbitkv.core.storage.dram;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.state.StateKey;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;

import static io.orbitkv.core.storage.dram.TestImages.key;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The tier's hint hooks under both policies: a held image survives a flood of another namespace
 * (the bound and class pressure both pass it over) and leaves normally once released; a drop
 * removes only the caller's namespace's image; another namespace's image of the same key is
 * absent to hold, hint and drop alike.
 */
class DramHoldTest {

    private static final int K4 = 4096;
    private static final int A = 1;
    private static final int B = 2;

    @TempDir
    Path dir;

    private final ResidencyStream stream = new ResidencyStream(4096);
    private DramTier tier;

    @AfterEach
    void closeTier() {
        if (tier != null) tier.close();
    }

    /** 16 slots of 4 KiB; the index bound is 12 of them (4 KiB reserved, 12 KiB evicted-leased budgets). */
    private DramTier open(DramEviction eviction) throws IOException {
        tier = DramTier.open(new DramTierConfig(dir, "hold", List.of(new SizeClass(K4, 16)), K4, 3L * K4, 64)
                .withEviction(eviction), stream, new SimpleMeterRegistry());
        return tier;
    }

    private void publish(StateKey key, int namespaceId) {
        ReserveResult r = tier.reserve(key, namespaceId, K4);
        assertThat(r).as("reserve %s", key).isInstanceOf(Reservation.class);
        assertThat(tier.commit((Reservation) r)).isInstanceOf(CommitResult.Inserted.class);
    }

    @ParameterizedTest
    @EnumSource(DramEviction.class)
    void aHeldImageOutlivesAFloodOfAnotherNamespaceAndLeavesOnceReleased(DramEviction eviction) throws IOException {
        open(eviction);
        publish(key(1), A);
        publish(key(2), A);
        HeldImage held = tier.hold(key(1), A).orElseThrow();
        assertThat(tier.hold(key(1), A)).as("held already").isEmpty();
        assertThat(tier.holds(held)).isTrue();
        for (int i = 100; i < 200; i++) {
            publish(key(i), B);
            tier.runMaintenance();
        }
        assertThat(tier.contains(key(1), A)).as("held through 100 inserts of another namespace").isTrue();
        assertThat(tier.contains(key(2), A)).as("the unheld neighbour was evicted").isFalse();
        assertThat(tier.usage().usedBytes()).as("held bytes count against the bound").isLessThanOrEqualTo(12L * K4);
        assertThat(tier.releaseHold(held)).isTrue();
        assertThat(tier.releaseHold(held)).isFalse();
        assertThat(tier.slots().isLeased(held.slot())).as("a victim candidate again").isFalse();
        assertThat(tier.slots().weight(held.slot())).as("weighs its slot again").isEqualTo(K4);
        if (eviction == DramEviction.LRU) {
            // W-TinyLFU may keep it against one-off newcomers by its admission rule; LRU cannot.
            for (int i = 200; i < 300; i++) publish(key(i), B);
            assertThat(tier.contains(key(1), A)).as("released, it is evicted like any image").isFalse();
        }
    }

    @ParameterizedTest
    @EnumSource(DramEviction.class)
    void anotherNamespacesImageIsAbsentToHoldHintAndDrop(DramEviction eviction) throws IOException {
        open(eviction);
        publish(key(1), A);
        long before = stream.lastSequence();
        assertThat(tier.hold(key(1), B)).isEmpty();
        assertThat(tier.hint(key(1), B, ValueHint.DEMOTE)).isFalse();
        assertThat(tier.drop(key(1), B)).isFalse();
        assertThat(tier.hold(key(9), B)).as("as for a key nobody holds").isEmpty();
        assertThat(tier.drop(key(9), B)).isFalse();
        assertThat(tier.contains(key(1), A)).isTrue();
        assertThat(stream.lastSequence()).as("no residency event").isEqualTo(before);
    }

    @ParameterizedTest
    @EnumSource(DramEviction.class)
    void aDropRemovesTheImageAndALeasedOneKeepsItsBytesUntilReleased(DramEviction eviction) throws IOException {
        open(eviction);
        publish(key(1), A);
        publish(key(2), A);
        Lease reader = (Lease) tier.acquire(key(2), A);
        HeldImage held = tier.hold(key(1), A).orElseThrow();
        assertThat(tier.drop(key(1), A)).isTrue();
        assertThat(tier.holds(held)).as("a drop ends the hold").isFalse();
        assertThat(tier.drop(key(2), A)).isTrue();
        assertThat(tier.contains(key(1))).isFalse();
        assertThat(tier.contains(key(2))).isFalse();
        assertThat(tier.usage().evictedLeasedBytes()).as("the leased image waits for its reader").isEqualTo(K4);
        assertThat(reader.release()).isEqualTo(ReleaseResult.RELEASED);
        assertThat(tier.usage().evictedLeasedBytes()).isZero();
        assertThat(tier.usage().usedBytes()).isZero();
        List<ResidencyEvent.Kind> kinds = stream.readFrom(1, 100).events().stream().map(ResidencyEvent::kind).toList();
        assertThat(kinds).containsExactly(ResidencyEvent.Kind.ADDED, ResidencyEvent.Kind.ADDED,
                ResidencyEvent.Kind.REMOVED, ResidencyEvent.Kind.REMOVED);
    }
}
