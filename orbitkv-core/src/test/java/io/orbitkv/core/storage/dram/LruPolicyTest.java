package io.orbitkv.core.storage.dram;

import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Optional;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@link LruPolicy} through {@link EvictionPolicy}: victims leave in least recently inserted or
 * used order, leased images are passed over, class victims stay in their class and window, and
 * the CLOCK fallback gives each used image one more pass of the hand.
 */
class LruPolicyTest {

    private static final List<SizeClass> CLASSES = List.of(new SizeClass(4096, 4), new SizeClass(8192, 4));

    private final EvictionPolicy policy = EvictionPolicy.of(DramEviction.LRU, CLASSES);
    private final SlotTable slots = new SlotTable(CLASSES, 4 * 8192, 4 * 8192, policy);

    /** Reserves and publishes an image of {@code sizeClass}; returns its slot. */
    private int insert(int sizeClass) {
        SlotTable.Allocation.Allocated a = (SlotTable.Allocation.Allocated) slots.reserve(sizeClass);
        slots.publish(a.slot(), a.imageId());
        return a.slot();
    }

    private long image(int slot) {
        return slots.locked(() -> slots.imageIdLocked(slot));
    }

    private void use(int slot) {
        assertThat(slots.pinUse(slot, image(slot))).isTrue();
        slots.unpin(slot, image(slot));
    }

    private int evictBound() {
        EvictionPolicy.Victim v = policy.boundVictim(slots, 64).orElseThrow();
        assertThat(v.imageId()).isEqualTo(image(v.slot()));
        slots.retire(v.slot(), v.imageId(), DramMetrics.EvictionCause.POLICY);
        return v.slot();
    }

    @Test
    void victimsLeaveInLeastRecentlyUsedOrder() {
        int a = insert(0);
        int b = insert(1);
        int c = insert(0);
        int d = insert(1);
        use(a);
        assertThat(slots.touch(c, image(c))).isTrue(); // a republish is a use too
        assertThat(policy.indexEnforcesBound()).isFalse();
        assertThat(List.of(evictBound(), evictBound(), evictBound(), evictBound())).containsExactly(b, d, a, c);
        assertThat(policy.boundVictim(slots, 64)).isEmpty();
    }

    @Test
    void leasedImagesArePassedOverUntilAllAreLeased() {
        int a = insert(0);
        int b = insert(0);
        assertThat(slots.pin(a, image(a))).as("a quiet pin is no use: a stays least recent").isTrue();
        assertThat(policy.boundVictim(slots, 64).map(EvictionPolicy.Victim::slot)).contains(b);
        assertThat(policy.classVictim(slots, 0, 64).map(EvictionPolicy.Victim::slot)).contains(b);
        assertThat(slots.pin(b, image(b))).isTrue();
        assertThat(policy.classVictim(slots, 0, 64)).as("a leased image is never a class victim").isEmpty();
        assertThat(policy.boundVictim(slots, 64).map(EvictionPolicy.Victim::slot))
                .as("the bound takes the least recent even when leased: its slot then waits").contains(a);
    }

    @Test
    void classVictimsStayInTheirClassAndScanWindow() {
        int small = insert(0);
        int large = insert(1);
        assertThat(policy.classVictim(slots, 1, 64).map(EvictionPolicy.Victim::slot)).contains(large);
        assertThat(policy.classVictim(slots, 0, 64).map(EvictionPolicy.Victim::slot)).contains(small);
        use(small);
        assertThat(policy.classVictim(slots, 0, 1)).as("the class's image is not among the 1 least recent").isEmpty();
    }

    @Test
    void theClockFallbackGivesAUsedImageOneMorePass() {
        int s0 = insert(0);
        int s1 = insert(0);
        int s2 = insert(0);
        int s3 = insert(0);
        // Every image is marked by its insert: the first sweep clears all marks and names the first.
        assertThat(policy.fallbackVictim(slots, 0, 4).map(EvictionPolicy.Victim::slot)).contains(s0);
        slots.retire(s0, image(s0), DramMetrics.EvictionCause.CLASS_PRESSURE);
        use(s1);
        assertThat(policy.fallbackVictim(slots, 0, 4).map(EvictionPolicy.Victim::slot))
                .as("s0 is gone and s1 was used since the hand passed").contains(s2);
        assertThat(policy.fallbackVictim(slots, 0, 4).map(EvictionPolicy.Victim::slot)).contains(s3);
        assertThat(policy.fallbackVictim(slots, 0, 4).map(EvictionPolicy.Victim::slot))
                .as("s1's mark was cleared by the previous pass").contains(s1);
    }

    @Test
    void theClockNeverNamesALeasedImageAndStopsAtItsWindow() {
        int s0 = insert(0);
        int s1 = insert(0);
        assertThat(slots.pin(s0, image(s0))).isTrue();
        assertThat(policy.fallbackVictim(slots, 0, 1)).as("the window holds only the leased s0").isEmpty();
        Optional<EvictionPolicy.Victim> v = policy.fallbackVictim(slots, 0, 4);
        assertThat(v.map(EvictionPolicy.Victim::slot)).contains(s1);
        assertThat(policy.fallbackVictim(slots, 1, 4)).as("nothing resident in class 1").isEmpty();
    }
}
