package io.orbitkv.core.catalog;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.state.StateKey;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Batching per owner under one deadline, Unknown vs Absent, and the positive candidate cache. */
class CatalogLookupsTest {

    final SimpleMeterRegistry registry = new SimpleMeterRegistry();
    final InMemoryTransport transport = new InMemoryTransport();
    final List<Member> members = List.of(new Member("n0", "x:0", 1), new Member("n1", "x:1", 1), new Member("n2", "x:2", 1));
    final AtomicReference<MembershipView> view = new AtomicReference<>(MembershipView.valid(members, 7));
    CatalogLookups lookups;
    final List<StateKey> keys = new ArrayList<>();

    @BeforeEach
    void setUp() {
        long digest = MembershipView.digest(members);
        for (Member m : members) {
            ShardState s = new ShardState(m.nodeId(), 1, new ShardState.Budgets(8, 100), registry);
            for (Member src : members) {
                List<ResidencyEvent> held = src.nodeId().equals("n0")
                        ? List.of(new ResidencyEvent(1, Keys.key(0), ResidencyEvent.Medium.DRAM, ResidencyEvent.Kind.ADDED, 0))
                        : List.of();
                s.apply(new PushBatch(src.nodeId(), 1, 1, 1, true, true, digest,
                        held.stream().filter(e -> Rendezvous.owner(e.key(), members).equals(m)).toList()));
            }
            transport.owners.put(m.nodeId(), s);
        }
        lookups = new CatalogLookups(view::get, transport, Duration.ofMinutes(1), 1000, registry);
        for (int i = 0; i < 60; i++) keys.add(Keys.key(i));
    }

    @Test
    void everyKeyGetsOneAnswerFromItsOwner() {
        Map<StateKey, KeyLocation> got = lookups.lookup(keys, Duration.ofSeconds(2)).join();
        assertThat(got.keySet()).containsExactlyElementsOf(keys);
        assertThat(got.get(Keys.key(0))).isEqualTo(new KeyLocation.Present(
                List.of(new Holder("n0", 1, ResidencyEvent.Medium.DRAM, 1))));
        keys.subList(1, keys.size()).forEach(k -> assertThat(got.get(k)).isEqualTo(new KeyLocation.Absent()));
    }

    @Test
    void duplicatesAreAnsweredOnceInRequestOrderWithCachedAndAskedKeysMixed() {
        lookups.lookup(List.of(Keys.key(0)), Duration.ofSeconds(2)).join(); // key 0's holder is cached now
        List<StateKey> asked = List.of(Keys.key(5), Keys.key(0), Keys.key(5), Keys.key(3), Keys.key(0), Keys.key(7));
        Map<StateKey, KeyLocation> got = lookups.lookup(asked, Duration.ofSeconds(2)).join();
        assertThat(got.keySet()).containsExactly(Keys.key(5), Keys.key(0), Keys.key(3), Keys.key(7));
        assertThat(got.get(Keys.key(0))).isEqualTo(new KeyLocation.Present(
                List.of(new Holder("n0", 1, ResidencyEvent.Medium.DRAM, 1))));
        for (int k : new int[] {5, 3, 7}) assertThat(got.get(Keys.key(k))).isEqualTo(new KeyLocation.Absent());
        assertThat(registry.get("orbitkv_catalog_candidate_cache_hits").counter().count()).isEqualTo(1);
    }

    @Test
    void aSilentOwnerMakesItsKeysUnknownAtTheDeadlineAndTheOthersStillAnswer() {
        transport.silent.add("n1");
        long t0 = System.nanoTime();
        Map<StateKey, KeyLocation> got = lookups.lookup(keys, Duration.ofMillis(150)).join();
        assertThat(Duration.ofNanos(System.nanoTime() - t0)).isLessThan(Duration.ofSeconds(2));
        for (StateKey k : keys) {
            if (Rendezvous.owner(k, members).nodeId().equals("n1")) {
                assertThat(got.get(k)).isEqualTo(new KeyLocation.Unknown(KeyLocation.UnknownReason.TIMED_OUT));
            } else {
                assertThat(got.get(k)).isNotInstanceOf(KeyLocation.Unknown.class);
            }
        }
    }

    @Test
    void anUnreachableOwnerIsUnknownNeverAbsent() {
        transport.down.add(Rendezvous.owner(Keys.key(5), members).nodeId());
        assertThat(lookups.lookup(List.of(Keys.key(5)), Duration.ofSeconds(1)).join().get(Keys.key(5)))
                .isEqualTo(new KeyLocation.Unknown(KeyLocation.UnknownReason.UNREACHABLE));
    }

    @Test
    void anInvalidViewStopsRemoteWork() {
        transport.down.addAll(List.of("n0", "n1", "n2")); // any call would fail differently
        view.set(view.get().invalidate("etcd unreachable"));
        Map<StateKey, KeyLocation> got = lookups.lookup(keys, Duration.ofSeconds(1)).join();
        assertThat(got.values()).containsOnly(new KeyLocation.Unknown(KeyLocation.UnknownReason.NO_MEMBERSHIP));
    }

    @Test
    void positivesAreCachedOnlyWhileTheirHolderIncarnationIsLive() {
        lookups.lookup(List.of(Keys.key(0)), Duration.ofSeconds(1)).join();
        String owner = Rendezvous.owner(Keys.key(0), members).nodeId();
        transport.down.add(owner);
        assertThat(lookups.lookup(List.of(Keys.key(0)), Duration.ofSeconds(1)).join().get(Keys.key(0)))
                .as("served from the candidate cache").isInstanceOf(KeyLocation.Present.class);
        List<Member> restarted = List.of(new Member("n0", "x:0", 2), members.get(1), members.get(2));
        view.set(MembershipView.valid(restarted, 8));
        assertThat(lookups.lookup(List.of(Keys.key(0)), Duration.ofSeconds(1)).join().get(Keys.key(0)))
                .as("holder n0#1 is gone; the owner is asked and is down").isInstanceOf(KeyLocation.Unknown.class);
        assertThat(registry.get("orbitkv_catalog_candidate_cache_hits").counter().count()).isEqualTo(1);
    }
}
