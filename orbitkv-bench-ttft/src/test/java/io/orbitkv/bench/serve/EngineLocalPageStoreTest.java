package io.orbitkv.bench.serve;

import io.orbitkv.engine.FullAttention;
import io.orbitkv.engine.KvPageStore;
import io.orbitkv.engine.PrefixLookup;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.StateKeys;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The engine-local prompt cache: longest matching prefix over the cached sequences, the byte
 * bound, replacement of the entry a sequence extends, and no eviction under an open hit.
 */
class EngineLocalPageStoreTest {

    private static final int PAGE = 4;
    private static final long IMAGE = 64;
    private static final byte[] NS = new byte[32];

    private static List<StateKey> keys(int... tokens) {
        return StateKeys.forTokens(NS, FullAttention.GROUP, tokens, PAGE, new byte[0]);
    }

    private static int[] tokens(int seed, int n) {
        int[] t = new int[n];
        for (int i = 0; i < n; i++) t[i] = seed * 1000 + i;
        return t;
    }

    private static int[] extend(int[] a, int seed, int n) {
        int[] t = java.util.Arrays.copyOf(a, a.length + n);
        for (int i = 0; i < n; i++) t[a.length + i] = seed * 1000 + 500 + i;
        return t;
    }

    /** Writes page {@code index + first} as its fill byte, so a restore can tell which page it got. */
    private static KvPageStore.PageImageWriter fill(int first) {
        return (index, slot) -> slot.fill((byte) (first + index));
    }

    private static PrefixLookup.Hit hit(PrefixLookup l) {
        assertThat(l).isInstanceOf(PrefixLookup.Hit.class);
        return (PrefixLookup.Hit) l;
    }

    @Test
    void theLongestSharedPrefixOfAnyCachedSequenceIsRestored_andAnExtendingSequenceReplacesItsEntry() {
        try (EngineLocalPageStore store = new EngineLocalPageStore(10 * IMAGE)) {
            int[] a = tokens(1, 3 * PAGE);
            assertThat(store.lookupPrefix(keys(a), a.length)).isInstanceOf(PrefixLookup.Miss.class);
            assertThat(store.publish(keys(a), IMAGE, fill(0)).sealed()).isEqualTo(3);
            int[] a2 = extend(a, 1, 2 * PAGE);
            try (PrefixLookup.Hit h = hit(store.lookupPrefix(keys(a2), a2.length))) {
                assertThat(h.pages()).isEqualTo(3);
                assertThat(h.images().get(2).get(java.lang.foreign.ValueLayout.JAVA_BYTE, 0)).isEqualTo((byte) 2);
            }
            // the runner publishes only what it computed: pages 3 and 4
            store.publish(keys(a2).subList(3, 5), IMAGE, fill(3));
            assertThat(store.entries()).as("a2 replaced a").isEqualTo(1);
            assertThat(store.usedBytes()).isEqualTo(5 * IMAGE);
            try (PrefixLookup.Hit h = hit(store.lookupPrefix(keys(a2), a2.length))) {
                assertThat(h.pages()).isEqualTo(5);
                for (int p = 0; p < 5; p++) {
                    assertThat(h.images().get(p).get(java.lang.foreign.ValueLayout.JAVA_BYTE, IMAGE - 1)).isEqualTo((byte) p);
                }
            }
            assertThat(store.pinned()).isZero();
        }
    }

    @Test
    void theByteBoundEvictsTheLeastRecentlyUsedSequence_butNeverOneUnderAnOpenHit() {
        try (EngineLocalPageStore store = new EngineLocalPageStore(6 * IMAGE)) {
            int[] a = tokens(1, 3 * PAGE);
            int[] b = tokens(2, 3 * PAGE);
            int[] c = tokens(3, 3 * PAGE);
            store.publish(keys(a), IMAGE, fill(0));
            store.publish(keys(b), IMAGE, fill(0));
            PrefixLookup.Hit onA = hit(store.lookupPrefix(keys(a), a.length)); // a is now the most recent, and pinned
            store.lookupPrefix(keys(c), c.length);
            store.publish(keys(c), IMAGE, fill(0));
            assertThat(store.usedBytes()).isLessThanOrEqualTo(6 * IMAGE);
            assertThat(store.lookupPrefix(keys(b), b.length)).as("b was the least recently used").isInstanceOf(PrefixLookup.Miss.class);
            assertThat(onA.images().getFirst().byteSize()).isEqualTo(IMAGE);
            // everything else pinned: a new sequence that needs a's bytes is refused, not written over a
            PrefixLookup.Hit onC = hit(store.lookupPrefix(keys(c), c.length));
            int[] d = tokens(4, 3 * PAGE);
            store.lookupPrefix(keys(d), d.length);
            assertThat(store.publish(keys(d), IMAGE, fill(0)).refused()).isEqualTo(3);
            assertThat(store.pinned()).isEqualTo(2);
            onA.close();
            onC.close();
            onA.close();
            assertThat(store.pinned()).isZero();
            assertThat(store.publish(keys(d), IMAGE, fill(0)).sealed()).isEqualTo(3);
            assertThat(store.publish(keys(tokens(5, 7 * PAGE)), IMAGE, fill(0)).refused()).as("larger than the bound").isEqualTo(7);
        }
    }

    @Test
    void aZeroBoundCachesNothing() {
        try (EngineLocalPageStore store = new EngineLocalPageStore(0)) {
            int[] a = tokens(1, 2 * PAGE);
            assertThat(store.publish(keys(a), IMAGE, fill(0)).refused()).isEqualTo(2);
            assertThat(store.lookupPrefix(keys(a), a.length)).isInstanceOf(PrefixLookup.Miss.class);
        }
    }
}
