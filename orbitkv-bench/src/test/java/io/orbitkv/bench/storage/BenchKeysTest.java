package io.orbitkv.bench.storage;

import io.orbitkv.state.StateKey;
import org.junit.jupiter.api.Test;

import java.util.HashSet;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;

class BenchKeysTest {

    @Test
    void keysAreDistinctAndDeterministic() {
        Set<StateKey> seen = new HashSet<>();
        for (int i = 0; i < 100_000; i++) assertThat(seen.add(BenchKeys.key(i))).isTrue();
        assertThat(BenchKeys.key(42)).isEqualTo(BenchKeys.key(42));
    }

    @Test
    void consecutiveKeysDifferInAboutHalfTheirBits() {
        byte[] a = BenchKeys.key(7).toBytes();
        byte[] b = BenchKeys.key(8).toBytes();
        int differing = 0;
        for (int i = 0; i < a.length; i++) differing += Integer.bitCount((a[i] ^ b[i]) & 0xff);
        assertThat(differing).isBetween(96, 160);
    }
}
