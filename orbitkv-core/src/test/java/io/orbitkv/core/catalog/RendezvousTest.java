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

    /** The r owners of every test key, by brute force: all members sorted by score, best first. */
    static List<String> bruteForce(StateKey key, List<Member> members, int r) {
        long k = Rendezvous.mix(key.prefix64());
        return members.stream().sorted((a, b) -> {
            int c = Long.compareUnsigned(Rendezvous.score(k, b.nodeId()), Rendezvous.score(k, a.nodeId()));
            return c != 0 ? c : a.nodeId().compareTo(b.nodeId());
        }).limit(r).map(Member::nodeId).toList();
    }

    static List<String> ids(List<Member> owners) {
        return owners.stream().map(Member::nodeId).toList();
    }

    @Test
    void theROwnersAreTheRHighestScoresBestFirstAndSpreadEvenly() {
        for (int n : new int[] {1, 2, 3, 5, 8}) {
            List<Member> m = members(n);
            for (int r : new int[] {1, 2, 3}) {
                Map<String, Integer> counts = new HashMap<>();
                for (int i = 0; i < 5_000; i++) {
                    List<String> got = ids(Rendezvous.owners(Keys.key(i), m, r));
                    assertThat(got).as("n=%d r=%d key %d", n, r, i).isEqualTo(bruteForce(Keys.key(i), m, r))
                            .hasSize(Math.min(r, n)).doesNotHaveDuplicates();
                    assertThat(got.getFirst()).isEqualTo(Rendezvous.owner(Keys.key(i), m).nodeId());
                    got.forEach(o -> counts.merge(o, 1, Integer::sum));
                }
                double expected = 5_000.0 * Math.min(r, n) / n;
                counts.values().forEach(c -> assertThat(Math.abs(c - expected) / expected).isLessThan(0.1));
            }
        }
    }

    @Test
    void whenAMemberLeavesOnlyTheKeysItOwnedChangeOwnersAndOnlyByOneReplacement() {
        List<Member> four = members(4);
        List<Member> three = List.of(four.get(0), four.get(1), four.get(3)); // node-2 leaves
        int moved = 0;
        for (int i = 0; i < KEYS; i++) {
            List<String> before = ids(Rendezvous.owners(Keys.key(i), four, 2));
            List<String> after = ids(Rendezvous.owners(Keys.key(i), three, 2));
            if (!before.contains("node-2")) {
                assertThat(after).as("a key node-2 did not own keeps its owners, in order").isEqualTo(before);
                continue;
            }
            moved++;
            List<String> kept = new ArrayList<>(before);
            kept.remove("node-2");
            assertThat(after).as("the surviving owner stays; one replacement joins").containsAll(kept);
            assertThat(after.stream().filter(o -> !before.contains(o)).count()).isEqualTo(1);
        }
        assertThat((double) moved / KEYS).as("node-2 owned about 2/4 of the keys").isBetween(0.46, 0.54);
    }

    @Test
    void whenAMemberJoinsAKeysOwnersChangeOnlyByTakingTheJoinerIn() {
        List<Member> three = members(3);
        List<Member> four = members(4);
        int moved = 0;
        for (int i = 0; i < KEYS; i++) {
            List<String> before = ids(Rendezvous.owners(Keys.key(i), three, 2));
            List<String> after = ids(Rendezvous.owners(Keys.key(i), four, 2));
            if (after.equals(before)) continue;
            moved++;
            assertThat(after).as("only the joiner comes in").contains("node-3");
            assertThat(after.stream().filter(o -> !before.contains(o)).toList()).containsExactly("node-3");
        }
        assertThat((double) moved / KEYS).as("the joiner takes about 2/4 of the keys").isBetween(0.46, 0.54);
    }

    @Test
    void ownersRefuseNoMembersAndNoReplicas() {
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> Rendezvous.owners(Keys.key(1), List.of(), 2))
                .isInstanceOf(IllegalArgumentException.class);
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> Rendezvous.owners(Keys.key(1), members(3), 0))
                .isInstanceOf(IllegalArgumentException.class);
    }
}
