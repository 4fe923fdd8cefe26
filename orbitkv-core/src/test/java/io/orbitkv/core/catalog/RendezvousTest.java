package io.orbitkv.core.catalog;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.state.StateKey;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class RendezvousTest {

    static final int KEYS = 30_000;

    static List<Member> members(int n) {
        List<Member> out = new ArrayList<>();
        for (int i = 0; i < n; i++) out.add(new Member("node-" + i, "127.0.0.1:" + (7000 + i), 1));
        return out;
    }

    static Map<StateKey, String> owners(List<Member> members) {
        Map<StateKey, String> out = new HashMap<>();
        for (int i = 0; i < KEYS; i++) out.put(Keys.key(i), Rendezvous.owner(Keys.key(i), members).nodeId());
        return out;
    }

    @Test
    void structuredKeysSpreadEvenlyOverThreeAndEightMembers() {
        for (int n : new int[] {3, 8}) {
            Map<String, Integer> counts = new HashMap<>();
            owners(members(n)).values().forEach(o -> counts.merge(o, 1, Integer::sum));
            assertThat(counts).hasSize(n);
            double expected = (double) KEYS / n;
            // 30,000 keys: binomial σ ≈ 1 % of the mean for n = 3; 6 % leaves ample margin
            counts.values().forEach(c -> assertThat(Math.abs(c - expected) / expected).isLessThan(0.06));
        }
    }

    @Test
    void aJoiningMemberTakesOnlyItsShareAndOnlyForItself() {
        List<Member> three = members(3);
        List<Member> four = members(4);
        Map<StateKey, String> before = owners(three);
        Map<StateKey, String> after = owners(four);
        int moved = 0;
        for (var e : before.entrySet()) {
            String now = after.get(e.getKey());
            if (!now.equals(e.getValue())) {
                moved++;
                assertThat(now).as("a key only moves to the joiner").isEqualTo("node-3");
            }
        }
        assertThat((double) moved / KEYS).isBetween(0.22, 0.28); // expected 1/4
    }

    @Test
    void aLeavingMemberGivesUpOnlyItsKeys() {
        List<Member> three = members(3);
        List<Member> two = three.subList(0, 2);
        Map<StateKey, String> before = owners(three);
        Map<StateKey, String> after = owners(two);
        for (var e : before.entrySet()) {
            if (!e.getValue().equals("node-2")) assertThat(after.get(e.getKey())).isEqualTo(e.getValue());
        }
    }

    @Test
    void ownerIgnoresOrderAndIncarnation() {
        List<Member> m = members(5);
        List<Member> reversed = new ArrayList<>(m.reversed());
        reversed.set(0, new Member(reversed.get(0).nodeId(), "elsewhere:1", 99));
        for (int i = 0; i < 1000; i++) {
            assertThat(Rendezvous.owner(Keys.key(i), reversed).nodeId()).isEqualTo(Rendezvous.owner(Keys.key(i), m).nodeId());
        }
    }
}
