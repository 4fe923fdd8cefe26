package io.orbitkv.core.storage.dram;

import com.github.benmanes.caffeine.cache.Cache;
import io.orbitkv.state.StateKey;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static io.orbitkv.core.storage.dram.TestImages.key;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@link TinyLfuPolicy} through {@link EvictionPolicy}: the index it builds bounds itself and
 * refuses a cold newcomer against a hot set (admission), its class victims are unleased images of
 * the class, and a republish is not a use for its CLOCK fallback.
 */
class TinyLfuPolicyTest {

    private static final int K4 = 4096;
    private static final List<SizeClass> CLASSES = List.of(new SizeClass(K4, 12), new SizeClass(2 * K4, 4));
    /** The index holds 8 images of 4 KiB. */
    private static final long MAX_WEIGHT = 8L * K4;

    private final EvictionPolicy policy = EvictionPolicy.of(DramEviction.W_TINY_LFU, CLASSES);
    private final SlotTable slots = new SlotTable(CLASSES, 4L * K4, 4L * K4, policy);
    private final List<StateKey> evicted = new ArrayList<>();
    private final Cache<PageKey, ResidentImage> index = policy.newIndex(slots, MAX_WEIGHT, (key, image) -> {
        evicted.add(key.key());
        slots.retire(image.slot(), image.imageId(), DramMetrics.EvictionCause.POLICY);
    });

    /** Reserves, publishes and indexes an image of {@code sizeClass} under {@code key}. */
    private ResidentImage insert(StateKey key, int sizeClass) {
        SlotTable.Allocation.Allocated a = (SlotTable.Allocation.Allocated) slots.reserve(sizeClass);
        ResidentImage image = new ResidentImage(a.slot(), K4, 1, a.imageId());
        return index.get(new PageKey(1, key), k -> {
            slots.publish(a.slot(), a.imageId());
            return image;
        });
    }

    @Test
    void aColdNewcomerIsRefusedAgainstAHotSet() {
        assertThat(policy.indexEnforcesBound()).isTrue();
        for (int i = 0; i < 8; i++) insert(key(i), 0);
        for (int round = 0; round < 20; round++) {
            for (int i = 0; i < 8; i++) assertThat(index.getIfPresent(new PageKey(1, key(i)))).isNotNull();
        }
        insert(key(100), 0);
        index.cleanUp();
        assertThat(evicted).as("W-TinyLFU admits by frequency: the one-off newcomer leaves").containsExactly(key(100));
        for (int i = 0; i < 8; i++) assertThat(index.getIfPresent(new PageKey(1, key(i)))).isNotNull();
        assertThat(slots.usage().usedBytes()).isEqualTo(MAX_WEIGHT);
        assertThat(policy.boundVictim(slots, 64)).as("the index bounds itself").isEmpty();
    }

    @Test
    void classVictimsAreUnleasedImagesOfTheClass() {
        ResidentImage small = insert(key(1), 0);
        ResidentImage large = insert(key(2), 1);
        index.cleanUp();
        assertThat(policy.classVictim(slots, 1, 64)).contains(new EvictionPolicy.Victim(large.slot(), large.imageId()));
        assertThat(policy.classVictim(slots, 0, 64)).contains(new EvictionPolicy.Victim(small.slot(), small.imageId()));
        assertThat(slots.pin(large.slot(), large.imageId())).isTrue();
        assertThat(policy.classVictim(slots, 1, 64)).as("a leased image is never a class victim").isEmpty();
    }

    @Test
    void aRepublishIsNoUseForTheClockFallback() {
        ResidentImage s0 = insert(key(1), 1);
        ResidentImage s1 = insert(key(2), 1);
        // Both are marked by their insert: the first sweep clears the marks and names the first.
        assertThat(policy.fallbackVictim(slots, 1, 4).map(EvictionPolicy.Victim::slot)).contains(s0.slot());
        assertThat(slots.touch(s0.slot(), s0.imageId())).isTrue();
        assertThat(policy.fallbackVictim(slots, 1, 4).map(EvictionPolicy.Victim::slot))
                .as("unlike LRU, W-TinyLFU does not count a republish").contains(s0.slot());
        assertThat(slots.pinUse(s0.slot(), s0.imageId())).isTrue();
        slots.unpin(s0.slot(), s0.imageId());
        assertThat(policy.fallbackVictim(slots, 1, 4).map(EvictionPolicy.Victim::slot)).contains(s1.slot());
        assertThat(policy.fallbackVictim(slots, 1, 4).map(EvictionPolicy.Victim::slot))
                .as("the hand reaches s0 again, but its hit gives it one more pass").contains(s1.slot());
    }

    @Test
    void aDemotedImageIsTheFirstClassVictimAndAHeldOneNone() {
        ResidentImage first = insert(key(1), 0);
        ResidentImage second = insert(key(2), 0);
        ResidentImage third = insert(key(3), 0);
        assertThat(policy.classVictim(slots, 0, 64).map(EvictionPolicy.Victim::slot))
                .as("Caffeine's coldest first").contains(first.slot());
        assertThat(slots.hint(third.slot(), third.imageId(), ValueHint.DEMOTE)).isTrue();
        assertThat(policy.classVictim(slots, 0, 64).map(EvictionPolicy.Victim::slot)).contains(third.slot());
        assertThat(slots.hold(third.slot(), third.imageId())).isTrue();
        assertThat(policy.classVictim(slots, 0, 64).map(EvictionPolicy.Victim::slot))
                .as("a held image is passed over, demoted or not").contains(first.slot());
        assertThat(slots.hold(first.slot(), first.imageId())).isTrue();
        assertThat(policy.classVictim(slots, 0, 64).map(EvictionPolicy.Victim::slot)).contains(second.slot());
        assertThat(policy.fallbackVictim(slots, 0, 64).map(EvictionPolicy.Victim::slot)).contains(second.slot());
        assertThat(slots.weight(first.slot())).as("a held image weighs nothing in the index").isZero();
        assertThat(slots.weight(second.slot())).isEqualTo(K4);
    }
}
