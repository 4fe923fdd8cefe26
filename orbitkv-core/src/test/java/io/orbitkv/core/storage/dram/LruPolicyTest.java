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

    @Test
    void demotedImagesLeaveFirstAndRetainedOnesLast() {
        int a = insert(0);
        int b = insert(0);
        int c = insert(1);
        int d = insert(1);
        assertThat(slots.hint(c, image(c), ValueHint.DEMOTE)).isTrue();
        assertThat(slots.hint(a, image(a), ValueHint.RETAIN)).isTrue();
        use(d); // a later use is more recent than the RETAIN
        assertThat(slots.hint(b, 99, ValueHint.RETAIN)).as("a hint for an image the slot no longer holds").isFalse();
        assertThat(((LruPolicy) policy).recencyOrder(slots)).containsExactly(c, b, a, d);
        assertThat(policy.classVictim(slots, 1, 64).map(EvictionPolicy.Victim::slot)).contains(c);
        assertThat(List.of(evictBound(), evictBound(), evictBound(), evictBound())).containsExactly(c, b, a, d);
    }

    @Test
    void aHeldImageIsNoVictimOfAnyKindUntilReleased() {
        int a = insert(0);
        int b = insert(0);
        assertThat(slots.hold(a, image(a))).isTrue();
        assertThat(slots.hold(a, image(a))).as("held already").isFalse();
        assertThat(slots.hint(a, image(a), ValueHint.DEMOTE)).as("answered, but a held image is not reordered").isTrue();
        assertThat(policy.classVictim(slots, 0, 64).map(EvictionPolicy.Victim::slot)).contains(b);
        assertThat(policy.fallbackVictim(slots, 0, 64).map(EvictionPolicy.Victim::slot)).contains(b);
        assertThat(slots.pin(b, image(b))).isTrue(); // now b is leased: the bound's last resort would be a leased image
        assertThat(policy.boundVictim(slots, 64).map(EvictionPolicy.Victim::slot))
                .as("the bound takes a leased image before a held one").contains(b);
        slots.unpin(b, image(b));
        slots.retire(b, image(b), DramMetrics.EvictionCause.POLICY);
        assertThat(policy.boundVictim(slots, 64)).as("only the held image is resident").isEmpty();
        assertThat(policy.classVictim(slots, 0, 64)).isEmpty();
        assertThat(policy.fallbackVictim(slots, 0, 64)).isEmpty();
        assertThat(slots.heldBytes()).isEqualTo(4096);
        assertThat(slots.unhold(a, image(a))).isTrue();
        assertThat(slots.heldBytes()).isZero();
        assertThat(evictBound()).as("released, it is evictable again").isEqualTo(a);
    }

    @Test
    void retiringAHeldImageReleasesItsHold() {
        int a = insert(0);
        long imageA = image(a);
        assertThat(slots.hold(a, imageA)).isTrue();
        slots.retire(a, imageA, DramMetrics.EvictionCause.DROPPED);
        assertThat(slots.heldBytes()).isZero();
        assertThat(slots.holds(a, imageA)).isFalse();
        assertThat(slots.unhold(a, imageA)).isFalse();
        int again = insert(0);
        assertThat(again).as("the slot was freed at once").isEqualTo(a);
        assertThat(policy.boundVictim(slots, 64).map(EvictionPolicy.Victim::slot)).contains(again);
    }
}
