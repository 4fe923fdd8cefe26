package io.orbitkv.core.catalog;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.core.storage.residency.ResidencyEvent.Kind;
import io.orbitkv.core.storage.residency.ResidencyEvent.Medium;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.state.StateKey;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * Replicated evidence (R = 2) wired in memory: four or five members, each a shard owner judging
 * placement versions against the shared current view, and each a source with its own publisher
 * (only n0 holds keys). A member leaving or joining is handed off without any held key answering
 * anything but Present at any step; an owner down or silent does not hide a key its other owner
 * holds; a stale placement version is detected and asked again under the new view.
 */
class ReplicatedCatalogTest {

    static final int R = 2;
    static final int HELD = 300;

    final InMemoryTransport transport = new InMemoryTransport();
    final AtomicReference<MembershipView> current = new AtomicReference<>();
    final Map<String, CatalogPublisher> publishers = new HashMap<>();
    final Map<String, SimpleMeterRegistry> registries = new HashMap<>();
    final ResidencyStream held = new ResidencyStream(4096);
    long now = 1_000_000_000L;

    static List<Member> members(int n) {
        List<Member> out = new ArrayList<>();
        for (int i = 0; i < n; i++) out.add(new Member("n" + i, "x:" + i, 1));
        return out;
    }

    /** Starts member {@code m}: its shard owner and its publisher (n0 publishes {@link #held}). */
    void start(Member m) {
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        registries.put(m.nodeId(), registry);
        transport.owners.put(m.nodeId(), new ShardState(m.nodeId(), m.incarnation(), new ShardState.Budgets(8, 10_000),
                registry, current::get));
        ResidencyStream stream = m.nodeId().equals("n0") ? held : new ResidencyStream(16);
        // small batches, one per pump: every intermediate state of a handoff is looked at
        publishers.put(m.nodeId(), new CatalogPublisher(m.nodeId(), m.incarnation(), stream, med -> List.of(), transport,
                new CatalogPublisher.Budgets(16, 10_000, 1, 100, 4096), R, registry, new java.util.SplittableRandom(1)));
    }

    /** One pump of every publisher; true when all are idle. */
    boolean pumpAll() {
        boolean idle = true;
        for (CatalogPublisher p : publishers.values()) idle &= p.pump(current.get(), now);
        now += 1_000_000;
        return idle;
    }

    Map<StateKey, KeyLocation> lookAll(int n) {
        List<StateKey> keys = new ArrayList<>();
        for (int i = 0; i < n; i++) keys.add(Keys.key(i));
        return new CatalogLookups(current::get, transport, Duration.ofMillis(1), 1, R, 64, new SimpleMeterRegistry())
                .lookup(keys, Duration.ofSeconds(2)).join();
    }

    void startCluster(int n) {
        current.set(MembershipView.valid(members(n), 1));
        members(n).forEach(this::start);
        for (int i = 0; i < HELD; i++) held.append(Keys.key(i), Medium.DRAM, Kind.ADDED, 0);
        for (int i = 0; i < 10_000 && !pumpAll(); i++) { }
        Map<StateKey, KeyLocation> got = lookAll(HELD + 1);
        for (int i = 0; i < HELD; i++) assertThat(got.get(Keys.key(i))).isInstanceOf(KeyLocation.Present.class);
        assertThat(got.get(Keys.key(HELD))).as("caught up everywhere: the unpublished key is absent").isEqualTo(new KeyLocation.Absent());
    }

    /** Pumps until idle, looking every held key up after each pump: Present every time. */
    int handOffWatchingEveryStep(String why) {
        int steps = 0;
        boolean idle = false;
        while (!idle) {
            idle = pumpAll();
            steps++;
            assertThat(steps).isLessThan(10_000);
            Map<StateKey, KeyLocation> got = lookAll(HELD + 1);
            for (int i = 0; i < HELD; i++) {
                assertThat(got.get(Keys.key(i))).as("%s: key %d at step %d", why, i, steps).isInstanceOf(KeyLocation.Present.class);
            }
            assertThat(got.get(Keys.key(HELD))).as("never a false absent").isNotInstanceOf(KeyLocation.Present.class);
        }
        return steps;
    }

    double counter(String node, String name) {
        return registries.get(node).get(name).counter().count();
    }

    @Test
    void aLeavingOwnerIsHandedOffWithoutAWindowAndWithoutSnapshots() {
        startCluster(4);
        double snapshotsBefore = counter("n0", "orbitkv_catalog_snapshots_sent");
        // n3 dies: its shard is gone, and the view drops it
        transport.owners.remove("n3");
        transport.down.add("n3");
        publishers.remove("n3");
        current.set(MembershipView.valid(members(3), 2));
        int steps = handOffWatchingEveryStep("n3 left");
        assertThat(steps).as("the handoff took several batches").isGreaterThan(2);
        assertThat(counter("n0", "orbitkv_catalog_snapshots_sent")).as("survivors are handed off, not resnapshotted")
                .isEqualTo(snapshotsBefore);
        assertThat(counter("n0", "orbitkv_catalog_handoffs_sent")).isEqualTo(3);
        assertThat(counter("n0", "orbitkv_catalog_handoff_deltas")).as("n3's keys each moved to one new owner").isPositive();
        assertThat(lookAll(HELD + 1).get(Keys.key(HELD))).as("coverage is back under the new placement").isEqualTo(new KeyLocation.Absent());
        assertHeldOnExactlyROwners(members(3));
    }

    @Test
    void aJoiningOwnerGetsASnapshotAndTheOthersDropWhatMovedToIt() {
        startCluster(4);
        current.set(MembershipView.valid(members(5), 2));
        start(members(5).get(4));
        handOffWatchingEveryStep("n4 joined");
        assertThat(counter("n0", "orbitkv_catalog_handoffs_sent")).isEqualTo(4);
        assertThat(lookAll(HELD + 1).get(Keys.key(HELD))).isEqualTo(new KeyLocation.Absent());
        assertHeldOnExactlyROwners(members(5));
    }

    /** Every held key is in the tables of exactly its R owners (the moved-away copies were removed). */
    void assertHeldOnExactlyROwners(List<Member> live) {
        long total = 0;
        for (Member m : live) total += transport.owners.get(m.nodeId()).keyCount();
        assertThat(total).isEqualTo((long) HELD * R);
        for (int i = 0; i < HELD; i++) {
            StateKey k = Keys.key(i);
            for (Member o : Rendezvous.owners(k, live, R)) {
                assertThat(transport.owners.get(o.nodeId()).lookup(List.of(k), live, MembershipView.digest(live)).getFirst())
                        .isInstanceOf(KeyLocation.Present.class);
            }
        }
    }

    @Test
    void oneOwnerDownOrSilentDoesNotHideAKeyTheOtherOwnerHolds() {
        startCluster(3);
        transport.down.add("n1");
        Map<StateKey, KeyLocation> got = lookAll(HELD);
        assertThat(got.values()).allMatch(l -> l instanceof KeyLocation.Present);
        transport.down.clear();
        transport.silent.add("n2");
        long t0 = System.nanoTime();
        List<StateKey> keys = new ArrayList<>();
        for (int i = 0; i < HELD; i++) keys.add(Keys.key(i));
        Map<StateKey, KeyLocation> answers = new CatalogLookups(current::get, transport, Duration.ofMillis(1), 1, R, 64,
                new SimpleMeterRegistry()).lookup(keys, Duration.ofSeconds(5)).join();
        assertThat(answers.values()).allMatch(l -> l instanceof KeyLocation.Present);
        assertThat(Duration.ofNanos(System.nanoTime() - t0)).as("settled by the other owners, not the silent one's deadline")
                .isLessThan(Duration.ofSeconds(2));
    }

    @Test
    void aStalePlacementIsDetectedAndAskedAgainUnderTheNewView() {
        startCluster(3);
        MembershipView fresh = current.get();
        MembershipView stale = MembershipView.valid(members(4), 0); // still lists a member that left
        AtomicInteger reads = new AtomicInteger();
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        // the requester's view is stale for its first two reads (the lookup and its first round), then fresh
        CatalogLookups lookups = new CatalogLookups(() -> reads.getAndIncrement() < 2 ? stale : fresh, transport,
                Duration.ofMillis(1), 1, R, 64, registry);
        StateKey never = Keys.key(HELD);
        ShardState owner = transport.owners.get(Rendezvous.owners(never, members(3), R).getFirst().nodeId());
        assertThat(owner.lookup(List.of(never, Keys.key(0)), stale.live(), stale.digest()).getFirst())
                .isEqualTo(new KeyLocation.Unknown(KeyLocation.UnknownReason.STALE_PLACEMENT));
        assertThat(lookups.lookup(List.of(never), Duration.ofSeconds(2)).join().get(never))
                .as("asked again, re-routed under the fresh view").isEqualTo(new KeyLocation.Absent());
        assertThat(registry.get("orbitkv_catalog_stale_placement").tag("side", "requester").counter().count()).isEqualTo(1);
    }

    @Test
    void mergeKeepsEveryOwnersHoldersAndPrefersPresentThenAbsent() {
        Holder a = new Holder("n0", 1, ResidencyEvent.Medium.DRAM, 3);
        Holder b = new Holder("n1", 1, ResidencyEvent.Medium.SSD, 4);
        KeyLocation unknown = new KeyLocation.Unknown(KeyLocation.UnknownReason.TIMED_OUT);
        KeyLocation stale = new KeyLocation.Unknown(KeyLocation.UnknownReason.STALE_PLACEMENT);
        assertThat(ReplicaMerge.merge(new KeyLocation.Present(List.of(a)), new KeyLocation.Present(List.of(a, b))))
                .isEqualTo(new KeyLocation.Present(List.of(a, b)));
        assertThat(ReplicaMerge.merge(new KeyLocation.Absent(), new KeyLocation.Present(List.of(b))))
                .isEqualTo(new KeyLocation.Present(List.of(b)));
        assertThat(ReplicaMerge.merge(unknown, new KeyLocation.Absent())).isEqualTo(new KeyLocation.Absent());
        assertThat(ReplicaMerge.merge(unknown, stale)).as("worth asking again").isEqualTo(stale);
        assertThat(ReplicaMerge.merge(stale, unknown)).isEqualTo(stale);
    }
}
