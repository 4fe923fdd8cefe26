package io.orbitkv.core.catalog;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.log.UnexpectedErrors;
import io.orbitkv.core.storage.residency.ResidencyEvent.Kind;
import io.orbitkv.core.storage.residency.ResidencyEvent.Medium;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.state.StateKey;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The source side: journal bounds, stream gaps, dead owners, push backoff, stale incarnations, invalid views. */
class CatalogPublisherTest {

    final SimpleMeterRegistry registry = new SimpleMeterRegistry();
    final InMemoryTransport transport = new InMemoryTransport();
    final Member self = new Member("src", "x:0", 1);
    final Member other = new Member("own", "x:1", 1);
    final List<Member> live = List.of(other, self);
    final MembershipView view = MembershipView.valid(live, 3);
    final ResidencyStream stream = new ResidencyStream(64);
    final List<StateKey> resident = new ArrayList<>();
    /** The publisher's clock, driven by the tests. */
    long now = 1_000_000_000L;

    CatalogPublisher publisher(int journalDeltas) {
        for (Member m : live) transport.owners.put(m.nodeId(), new ShardState(m.nodeId(), m.incarnation(), new ShardState.Budgets(4, 10_000), registry));
        return new CatalogPublisher("src", 1, stream, medium -> medium == Medium.DRAM ? List.copyOf(resident) : List.of(),
                transport, new CatalogPublisher.Budgets(8, journalDeltas, 1_000, 100, 32), registry);
    }

    void add(int i) {
        stream.append(Keys.key(i), Medium.DRAM, Kind.ADDED, 0);
        resident.add(Keys.key(i));
    }

    List<KeyLocation> lookAll(int n) {
        List<StateKey> keys = new ArrayList<>();
        for (int i = 0; i < n; i++) keys.add(Keys.key(i));
        Map<StateKey, KeyLocation> got = new CatalogLookups(() -> view, transport, Duration.ofMillis(1), 1, registry)
                .lookup(keys, Duration.ofSeconds(1)).join();
        return keys.stream().map(got::get).toList();
    }

    @Test
    void aDeadOwnersJournalStaysBoundedAndASnapshotCatchesItUp() {
        CatalogPublisher p = publisher(10);
        assertThat(p.pump(view, now)).isTrue();
        transport.down.add("own");
        for (int i = 0; i < 40; i++) {
            add(i);
            p.pump(view, now);
            assertThat(registry.get("orbitkv_catalog_journal_deltas").gauge().value()).isLessThanOrEqualTo(10);
        }
        assertThat(registry.get("orbitkv_catalog_journal_overflows").counter().count()).isPositive();
        assertThat(lookAll(40)).as("owner down: its keys unknown, never absent").doesNotContain(new KeyLocation.Absent());
        transport.down.clear();
        now += 10_000_000_000L; // past the longest backoff
        assertThat(p.pump(view, now)).isTrue();
        assertThat(lookAll(40)).allMatch(l -> l instanceof KeyLocation.Present);
    }

    @Test
    void aPushThatThrowsIsCountedAndBacksOffLikeAFailedPushWhileTheOtherOwnersGoOn() {
        CatalogPublisher p = publisher(1_000);
        transport.buggy.add("own");
        for (int i = 0; i < 4; i++) add(i);
        long before = UnexpectedErrors.count(UnexpectedErrors.Layer.CLUSTER);
        p.pump(view, now); // does not throw: the publisher thread keeps running
        assertThat(UnexpectedErrors.count(UnexpectedErrors.Layer.CLUSTER) - before).isGreaterThanOrEqualTo(1);
        assertThat(registry.get("orbitkv_catalog_owners_backing_off").gauge().value()).isEqualTo(1);
        int tried = transport.pushes.get("own").get();
        p.pump(view, now + 1_000_000);
        assertThat(transport.pushes.get("own").get()).as("no push to it while it backs off").isEqualTo(tried);
        assertThat(lookAll(4)).as("the other owner's keys were published").anyMatch(l -> l instanceof KeyLocation.Present);
        transport.buggy.clear();
        now += 10_000_000_000L; // past the longest backoff
        assertThat(p.pump(view, now)).isTrue();
        assertThat(lookAll(4)).allMatch(l -> l instanceof KeyLocation.Present);
    }

    @Test
    void aLookupThatThrowsIsUnknownNeverAbsentAndCounted() {
        CatalogPublisher p = publisher(1_000);
        for (int i = 0; i < 4; i++) add(i);
        assertThat(p.pump(view, now)).isTrue();
        transport.buggy.add("own");
        long before = UnexpectedErrors.count(UnexpectedErrors.Layer.CLUSTER);
        List<KeyLocation> got = lookAll(4);
        assertThat(UnexpectedErrors.count(UnexpectedErrors.Layer.CLUSTER) - before).isGreaterThanOrEqualTo(1);
        assertThat(got).doesNotContain(new KeyLocation.Absent())
                .contains(new KeyLocation.Unknown(KeyLocation.UnknownReason.UNREACHABLE));
    }

    @Test
    void pageLengthsReachTheHoldersThroughDeltasAndSnapshots() {
        CatalogPublisher p = publisher(1_000);
        stream.append(Keys.key(1), Medium.SSD, Kind.ADDED, 7, 5_000);
        stream.append(Keys.key(2), Medium.DRAM, Kind.ADDED, 8, 12_288);
        stream.append(Keys.key(3), Medium.DRAM, Kind.ADDED, 9); // length unknown
        assertThat(p.pump(view, now)).isTrue();
        assertThat(lookAll(4).subList(1, 4)).extracting(l -> ((KeyLocation.Present) l).holders().getFirst().lengthBytes())
                .containsExactly(5_000, 12_288, 0);
        // a restarted owner is rebuilt from the mirror's snapshot, lengths included
        ShardState restarted = new ShardState("own", 2, new ShardState.Budgets(4, 10_000), registry);
        transport.owners.put("own", restarted);
        transport.owners.put("src", new ShardState("src", 2, new ShardState.Budgets(4, 10_000), registry));
        List<Member> again = List.of(new Member("own", "x:1", 2), new Member("src", "x:0", 1));
        MembershipView next = MembershipView.valid(again, 4);
        assertThat(p.pump(next, now)).isTrue();
        List<StateKey> keys = List.of(Keys.key(1), Keys.key(2));
        Map<StateKey, KeyLocation> got = new CatalogLookups(() -> next, transport, Duration.ofMillis(1), 1, registry)
                .lookup(keys, Duration.ofSeconds(1)).join();
        assertThat(keys).extracting(k -> ((KeyLocation.Present) got.get(k)).holders().getFirst().lengthBytes())
                .containsExactly(5_000, 12_288);
    }

    @Test
    void failedPushesBackOffExponentiallyWithJitterPerOwnerAndAnAnswerResetsIt() {
        for (Member m : live) transport.owners.put(m.nodeId(), new ShardState(m.nodeId(), m.incarnation(), new ShardState.Budgets(4, 10_000), registry));
        long seed = 42;
        CatalogPublisher p = new CatalogPublisher("src", 1, stream, medium -> List.of(), transport,
                new CatalogPublisher.Budgets(8, 100, 1_000, 100, 32, 50, 800, 60_000), registry, new java.util.SplittableRandom(seed));
        assertThat(p.pump(view, now)).isTrue();
        transport.down.add("own");
        for (int i = 0; i < 20; i++) add(i);
        long ms = 1_000_000L;
        long bound = 50;
        for (int failure = 1; failure <= 6; failure++) {
            int before = transport.pushes.get("own").get();
            assertThat(p.pump(view, now)).as("a backing-off owner leaves nothing to do now").isTrue();
            assertThat(transport.pushes.get("own").get()).as("failure %d: one push, then none until the backoff ends (seed %d)", failure, seed)
                    .isEqualTo(before + 1);
            for (int spin = 0; spin < 100; spin++) p.pump(view, now + bound / 2 * ms - 1);
            assertThat(transport.pushes.get("own").get()).as("no push before half the bound").isEqualTo(before + 1);
            now += bound * ms; // the wait is at most the bound
            bound = Math.min(800, bound * 2);
        }
        assertThat(registry.get("orbitkv_catalog_push_backoffs").counter().count()).isEqualTo(6);
        assertThat(registry.get("orbitkv_catalog_owners_backing_off").gauge().value()).isEqualTo(1);
        assertThat(transport.pushes.get("src").get()).as("the healthy owner is not held back").isPositive();
        transport.down.clear();
        assertThat(p.pump(view, now)).isTrue();
        assertThat(registry.get("orbitkv_catalog_owners_backing_off").gauge().value()).as("an answer resets the backoff").isZero();
        assertThat(lookAll(20)).allMatch(l -> l instanceof KeyLocation.Present);
        transport.down.add("own");
        add(20);
        int before = transport.pushes.get("own").get();
        p.pump(view, now);
        p.pump(view, now + 25 * ms - 1);
        assertThat(transport.pushes.get("own").get()).as("after a reset the first wait is short again").isEqualTo(before + 1);
        p.pump(view, now + 50 * ms);
        assertThat(transport.pushes.get("own").get()).isEqualTo(before + 2);
    }

    @Test
    void aReRegistrationResendsASnapshotToOwnersThatDroppedThisSource() {
        CatalogPublisher p = publisher(1_000);
        MembershipView first = MembershipView.valid(live, 3, 1);
        for (int i = 0; i < 30; i++) add(i);
        assertThat(p.pump(first, now)).isTrue();
        assertThat(lookAll(30)).allMatch(l -> l instanceof KeyLocation.Present);
        // this node's lease expired while it lived (paused): every owner saw it leave and dropped its table
        for (ShardState owner : transport.owners.values()) owner.retainMembers(List.of(other));
        // it re-registered with the same incarnation: same live set, same digest, one more registration
        MembershipView again = MembershipView.valid(live, 9, 2);
        assertThat(again.digest()).isEqualTo(first.digest());
        long snapshots = (long) registry.get("orbitkv_catalog_snapshots_sent").counter().count();
        assertThat(p.pump(again, now)).isTrue();
        assertThat(registry.get("orbitkv_catalog_snapshots_sent").counter().count()).as("a snapshot to every owner at once")
                .isEqualTo(snapshots + 2);
        assertThat(lookAll(30)).allMatch(l -> l instanceof KeyLocation.Present);
    }

    @Test
    void anIdleProbeFindsAnOwnerThatLostThisSourceWithoutAnyChangeHere() {
        CatalogPublisher p = publisher(1_000);
        for (int i = 0; i < 30; i++) add(i);
        assertThat(p.pump(view, now)).isTrue();
        for (ShardState owner : transport.owners.values()) owner.retainMembers(List.of(other));
        assertThat(p.pump(view, now + 999_000_000L)).isTrue();
        assertThat(lookAll(30)).as("no probe before 1 s idle").doesNotContain(new KeyLocation.Absent())
                .anyMatch(l -> l instanceof KeyLocation.Unknown);
        assertThat(p.pump(view, now + 1_000_000_000L)).isTrue();
        assertThat(registry.get("orbitkv_catalog_need_snapshot").counter().count()).as("the probe was answered NEED_SNAPSHOT").isPositive();
        assertThat(lookAll(30)).allMatch(l -> l instanceof KeyLocation.Present);
    }

    @Test
    void aLocalStreamGapIsRepairedFromTheTiers() {
        CatalogPublisher p = publisher(1_000);
        p.pump(view, now);
        for (int i = 0; i < 200; i++) add(i); // 200 events through a 64-event ring: a gap
        for (int round = 0; round < 5 && !p.pump(view, now); round++) {
            assertThat(round).isLessThan(4);
        }
        assertThat(registry.get("orbitkv_catalog_local_stream_gaps").counter().count()).isEqualTo(1);
        assertThat(p.mirroredKeys()).isEqualTo(200);
        assertThat(lookAll(200)).allMatch(l -> l instanceof KeyLocation.Present);
    }

    @Test
    void aBacklogOverTheReadBudgetIsNotIdleUntilReadToTheEnd() {
        CatalogPublisher p = publisher(1_000);
        assertThat(p.pump(view, now)).isTrue();
        for (int i = 0; i < 50; i++) add(i); // 50 events, 32 read per pump, no gap in a 64-event ring
        assertThat(p.pump(view, now)).as("18 events still unread").isFalse();
        assertThat(p.pump(view, now)).isTrue();
        assertThat(registry.get("orbitkv_catalog_local_stream_gaps").counter().count()).isZero();
        assertThat(lookAll(50)).allMatch(l -> l instanceof KeyLocation.Present);
    }

    @Test
    void anInvalidViewSendsNothingAndAStaleIncarnationStopsPublishing() {
        CatalogPublisher p = publisher(100);
        add(1);
        assertThat(p.pump(view.invalidate("etcd down"), now)).as("nothing can be done now: the loop polls, never spins").isTrue();
        assertThat(registry.get("orbitkv_catalog_deltas_sent").counter().count()).isZero();
        assertThat(transport.owners.get("own").caughtUpSources()).isEmpty();
        // a newer incarnation of this node already streamed to "own"
        transport.owners.get("own").apply(new PushBatch("src", 2, 1, 1, true, true, view.digest(), List.of()));
        p.pump(view, now);
        assertThat(p.stale()).isTrue();
        assertThat(p.pump(view, now)).as("a stale incarnation has nothing left to do").isTrue();
    }
}
