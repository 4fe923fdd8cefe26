package io.orbitkv.core.catalog;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.storage.residency.ResidencyEvent.Kind;
import io.orbitkv.core.storage.residency.ResidencyEvent.Medium;
import java.util.List;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class ShardStateTest {

    static final Member A = new Member("a", "127.0.0.1:1", 3);
    static final Member B = new Member("b", "127.0.0.1:2", 5);
    static final List<Member> LIVE = List.of(A, B);
    static final long DIGEST = MembershipView.digest(LIVE);

    ShardState shard;

    @BeforeEach
    void setUp() {
        shard = new ShardState("b", 5, new ShardState.Budgets(8, 4), new SimpleMeterRegistry());
    }

    static ResidencyEvent added(long seq, long key, Medium m) {
        return new ResidencyEvent(seq, Keys.key(key), m, Kind.ADDED, 0);
    }

    static ResidencyEvent removed(long seq, long key, Medium m) {
        return new ResidencyEvent(seq, Keys.key(key), m, Kind.REMOVED, 0);
    }

    static PushBatch snapshot(Member src, List<ResidencyEvent> d) {
        return new PushBatch(src.nodeId(), src.incarnation(), 5, 1, true, true, DIGEST, d);
    }

    static PushBatch deltas(Member src, long batch, List<ResidencyEvent> d) {
        return new PushBatch(src.nodeId(), src.incarnation(), 5, batch, false, false, DIGEST, d);
    }

    KeyLocation find(long key) {
        return shard.lookup(List.of(Keys.key(key)), LIVE, DIGEST).getFirst();
    }

    @Test
    void absentOnlyOnceEveryLiveSourceIsCaughtUp() {
        assertThat(shard.apply(snapshot(A, List.of(added(1, 1, Medium.DRAM)))).result()).isEqualTo(PushBatch.Result.APPLIED);
        assertThat(find(1)).isEqualTo(new KeyLocation.Present(List.of(new Holder("a", 3, Medium.DRAM, 1))));
        assertThat(find(2)).as("b has not sent its snapshot").isEqualTo(new KeyLocation.Unknown(KeyLocation.UnknownReason.NOT_CAUGHT_UP));
        shard.apply(snapshot(B, List.of()));
        assertThat(find(2)).isEqualTo(new KeyLocation.Absent());
        assertThat(shard.lookup(List.of(Keys.key(2)), LIVE, DIGEST + 1).getFirst())
                .as("a requester sharding over other members").isEqualTo(new KeyLocation.Unknown(KeyLocation.UnknownReason.VIEW_MISMATCH));
    }

    @Test
    void aSnapshotInTwoBatchesIsNotCoverageUntilItEnds() {
        shard.apply(snapshot(B, List.of()));
        shard.apply(new PushBatch("a", 3, 5, 1, true, false, DIGEST, List.of(added(4, 1, Medium.SSD))));
        assertThat(find(1)).isInstanceOf(KeyLocation.Present.class);
        assertThat(find(2)).isInstanceOf(KeyLocation.Unknown.class);
        shard.apply(new PushBatch("a", 3, 5, 2, false, true, DIGEST, List.of(added(2, 2, Medium.DRAM))));
        assertThat(find(2)).isInstanceOf(KeyLocation.Present.class);
        assertThat(find(3)).isEqualTo(new KeyLocation.Absent());
    }

    @Test
    void deltasApplyInOrderAndALostBatchDemandsASnapshot() {
        shard.apply(snapshot(B, List.of()));
        shard.apply(snapshot(A, List.of(added(1, 1, Medium.DRAM))));
        assertThat(shard.apply(deltas(A, 2, List.of(added(2, 1, Medium.SSD), removed(3, 1, Medium.DRAM)))).result())
                .isEqualTo(PushBatch.Result.APPLIED);
        assertThat(find(1)).isEqualTo(new KeyLocation.Present(List.of(new Holder("a", 3, Medium.SSD, 2))));
        assertThat(shard.apply(deltas(A, 4, List.of(removed(5, 1, Medium.SSD)))).result()).isEqualTo(PushBatch.Result.NEED_SNAPSHOT);
        assertThat(find(9)).as("after a gap the source is not coverage").isInstanceOf(KeyLocation.Unknown.class);
        assertThat(find(1)).as("nor evidence").isInstanceOf(KeyLocation.Unknown.class);
        assertThat(shard.apply(deltas(A, 3, List.of())).result()).as("until a snapshot").isEqualTo(PushBatch.Result.NEED_SNAPSHOT);
    }

    @Test
    void staleSourceIncarnationIsRefusedAndANewOneReplacesTheOld() {
        shard.apply(snapshot(A, List.of(added(1, 1, Medium.DRAM))));
        Member aRestarted = new Member("a", "127.0.0.1:1", 4);
        assertThat(shard.apply(deltas(aRestarted, 2, List.of())).result()).isEqualTo(PushBatch.Result.NEED_SNAPSHOT);
        assertThat(shard.apply(snapshot(A, List.of(added(9, 9, Medium.DRAM)))).result()).isEqualTo(PushBatch.Result.STALE_INCARNATION);
        assertThat(shard.apply(deltas(A, 2, List.of())).result()).isEqualTo(PushBatch.Result.STALE_INCARNATION);
        assertThat(shard.apply(snapshot(aRestarted, List.of())).result()).isEqualTo(PushBatch.Result.APPLIED);
        assertThat(shard.keyCount()).isZero();
    }

    @Test
    void aBatchForAnotherOwnerIncarnationIsRefusedWithTheCurrentOne() {
        PushBatch.Reply r = shard.apply(new PushBatch("a", 3, 4, 1, true, true, DIGEST, List.of()));
        assertThat(r).isEqualTo(new PushBatch.Reply(PushBatch.Result.WRONG_OWNER_INCARNATION, 5));
    }

    @Test
    void aSourceOverTheKeyBudgetIsNeverCoverage() {
        shard.apply(snapshot(B, List.of()));
        shard.apply(snapshot(A, List.of(added(1, 1, Medium.DRAM), added(2, 2, Medium.DRAM), added(3, 3, Medium.DRAM),
                added(4, 4, Medium.DRAM), added(5, 5, Medium.DRAM))));
        assertThat(shard.keyCount()).isEqualTo(4);
        assertThat(find(5)).isEqualTo(new KeyLocation.Unknown(KeyLocation.UnknownReason.SOURCE_OVERFLOW));
        assertThat(find(1)).isInstanceOf(KeyLocation.Present.class);
    }

    @Test
    void departedSourcesAreForgottenAndHoldersOfOtherIncarnationsIgnored() {
        shard.apply(snapshot(A, List.of(added(1, 1, Medium.DRAM))));
        Member aNew = new Member("a", "127.0.0.1:1", 4);
        assertThat(shard.lookup(List.of(Keys.key(1)), List.of(aNew, B), MembershipView.digest(List.of(aNew, B))).getFirst())
                .isInstanceOf(KeyLocation.Unknown.class);
        shard.retainMembers(List.of(B));
        assertThat(shard.keyCount()).isZero();
        assertThat(shard.caughtUpSources()).isEmpty();
    }

    @Test
    void removalOfAnOlderImageDoesNotHideANewerOne() {
        shard.apply(snapshot(B, List.of()));
        shard.apply(snapshot(A, List.of(added(7, 1, Medium.DRAM))));
        shard.apply(deltas(A, 2, List.of(removed(6, 1, Medium.DRAM))));
        assertThat(find(1)).isEqualTo(new KeyLocation.Present(List.of(new Holder("a", 3, Medium.DRAM, 7))));
    }

    @Test
    void aHandoffKeepsTheSourcesEntriesButGivesNoAbsentUntilItEnds() {
        shard.apply(snapshot(A, List.of(added(1, 1, Medium.DRAM))));
        shard.apply(snapshot(B, List.of()));
        List<Member> next = List.of(A, B, new Member("c", "127.0.0.1:3", 1));
        long nextDigest = MembershipView.digest(next);
        // c joined; a hands b the keys b gains under the new placement (c's snapshot to b is done)
        shard.apply(new PushBatch("c", 1, 5, 1, true, true, nextDigest, List.of()));
        shard.apply(new PushBatch("b", 5, 5, 2, false, false, nextDigest, List.of(), true));
        assertThat(shard.apply(new PushBatch("a", 3, 5, 2, false, false, nextDigest, List.of(added(2, 2, Medium.SSD)))).result())
                .isEqualTo(PushBatch.Result.APPLIED);
        assertThat(shard.lookup(List.of(Keys.key(1), Keys.key(3)), next, nextDigest))
                .as("kept entries still found; no absent while a hands off")
                .containsExactly(new KeyLocation.Present(List.of(new Holder("a", 3, Medium.DRAM, 1))),
                        new KeyLocation.Unknown(KeyLocation.UnknownReason.HANDOFF));
        shard.apply(new PushBatch("a", 3, 5, 3, false, false, nextDigest, List.of(), true));
        assertThat(shard.lookup(List.of(Keys.key(2), Keys.key(3)), next, nextDigest))
                .containsExactly(new KeyLocation.Present(List.of(new Holder("a", 3, Medium.SSD, 2))), new KeyLocation.Absent());
    }
}
