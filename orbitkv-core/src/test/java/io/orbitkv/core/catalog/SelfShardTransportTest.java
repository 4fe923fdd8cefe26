package io.orbitkv.core.catalog;

import static io.orbitkv.core.catalog.ShardStateTest.A;
import static io.orbitkv.core.catalog.ShardStateTest.B;
import static io.orbitkv.core.catalog.ShardStateTest.DIGEST;
import static io.orbitkv.core.catalog.ShardStateTest.LIVE;
import static io.orbitkv.core.catalog.ShardStateTest.added;
import static io.orbitkv.core.catalog.ShardStateTest.snapshot;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.core.storage.residency.ResidencyEvent.Medium;
import io.orbitkv.state.StateKey;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class SelfShardTransportTest {

    private ShardState self;
    private ShardState peer;
    private InMemoryTransport wire;
    private SelfShardTransport transport;

    @BeforeEach
    void setUp() {
        self = new ShardState(B.nodeId(), B.incarnation(), new ShardState.Budgets(8, 16), new SimpleMeterRegistry());
        peer = new ShardState(A.nodeId(), A.incarnation(), new ShardState.Budgets(8, 16), new SimpleMeterRegistry());
        wire = new InMemoryTransport();
        wire.owners.put(A.nodeId(), peer);
        wire.owners.put(B.nodeId(), self);
        // a call to this node that reached the wire would fail: only the in-process path answers it
        wire.down.add(B.nodeId());
        transport = new SelfShardTransport(B.nodeId(), B.incarnation(), self, wire);
    }

    @Test
    void callsToThisNodesShardAreAnsweredInProcessAsTheShardAnswersThem() throws Exception {
        PushBatch.Reply pushed = transport.push(B, snapshot(A, List.of(added(1, 1, Medium.DRAM))), 1_000).get();
        assertThat(pushed.result()).isEqualTo(PushBatch.Result.APPLIED);
        transport.push(B, snapshot(B, List.of()), 1_000).get();
        assertThat(wire.pushes.get(B.nodeId())).as("no push to this node went over the wire").isNull();

        List<StateKey> keys = List.of(Keys.key(1), Keys.key(2));
        List<KeyLocation> answered = transport.lookup(B, keys, LIVE, DIGEST, 1_000).get();
        assertThat(answered).isEqualTo(self.lookup(keys, LIVE, DIGEST));
        assertThat(answered).containsExactly(new KeyLocation.Present(List.of(new Holder("a", 3, Medium.DRAM, 1))),
                new KeyLocation.Absent());
        assertThat(transport.lookup(B, keys, LIVE, DIGEST + 1, 1_000).get())
                .as("another placement version: the evidence held, and no absent")
                .containsExactly(answered.getFirst(), new KeyLocation.Unknown(KeyLocation.UnknownReason.VIEW_MISMATCH));
    }

    @Test
    void callsToOtherOwnersAndToThisNodesOtherLivesGoOverTheWire() throws Exception {
        peer.apply(toPeer(B, List.of(added(1, 7, Medium.SSD))));
        peer.apply(toPeer(A, List.of()));
        assertThat(transport.lookup(A, List.of(Keys.key(7)), LIVE, DIGEST, 1_000).get())
                .containsExactly(new KeyLocation.Present(List.of(new Holder("b", 5, Medium.SSD, 1))));
        assertThat(transport.push(A, toPeer(B, List.of()), 1_000).get().result()).isEqualTo(PushBatch.Result.APPLIED);
        assertThat(wire.pushes.get(A.nodeId())).hasValue(1);

        Member earlierLife = new Member(B.nodeId(), B.endpoint(), B.incarnation() - 1);
        assertThat(transport.lookup(earlierLife, List.of(Keys.key(7)), LIVE, DIGEST, 1_000))
                .as("this node's earlier incarnation is not this shard").isCompletedExceptionally();
    }

    /** A snapshot from {@code src} to the peer's shard (owner A's incarnation). */
    private static PushBatch toPeer(Member src, List<ResidencyEvent> events) {
        return new PushBatch(src.nodeId(), src.incarnation(), A.incarnation(), 1, true, true, DIGEST, events);
    }

    @Test
    void aLookupOverTheKeyLimitFailsAsTheServiceRefusesIt() {
        List<StateKey> keys = new ArrayList<>();
        for (int i = 0; i <= CatalogTransport.MAX_LOOKUP_KEYS; i++) keys.add(Keys.key(i));
        assertThatThrownBy(() -> transport.lookup(B, keys, LIVE, DIGEST, 1_000).get())
                .isInstanceOf(ExecutionException.class).hasCauseInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new SelfShardTransport(B.nodeId(), B.incarnation() + 1, self, wire))
                .as("the shard of another life").isInstanceOf(IllegalArgumentException.class);
    }
}
