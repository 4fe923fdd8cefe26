package io.orbitkv.server.cluster;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.orbitkv.core.catalog.Holder;
import io.orbitkv.core.catalog.KeyLocation;
import io.orbitkv.core.catalog.PushBatch;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.server.cluster.proto.Delta;
import io.orbitkv.state.StateKey;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Page lengths survive the wire both ways (deltas and holders); 0 stays "unknown"; negative is malformed. */
class CatalogCodecTest {

    static final StateKey KEY = StateKey.ofBytes(new byte[32]);

    @Test
    void deltasAndHoldersCarryThePageLength() {
        PushBatch sent = new PushBatch("a", 1, 2, 1, true, true, 9, List.of(
                new ResidencyEvent(5, KEY, ResidencyEvent.Medium.SSD, ResidencyEvent.Kind.ADDED, 0, 5_000),
                new ResidencyEvent(6, KEY, ResidencyEvent.Medium.DRAM, ResidencyEvent.Kind.ADDED, 0)));
        PushBatch received = CatalogCodec.batch(CatalogCodec.request(sent));
        assertThat(received.deltas()).extracting(ResidencyEvent::lengthBytes).containsExactly(5_000, 0);

        KeyLocation present = new KeyLocation.Present(List.of(new Holder("a", 1, ResidencyEvent.Medium.SSD, 5, 5_000),
                new Holder("b", 2, ResidencyEvent.Medium.DRAM, 6)));
        assertThat(CatalogCodec.location(CatalogCodec.result(present))).isEqualTo(present);
    }

    @Test
    void aNegativeLengthIsMalformed() {
        var request = CatalogCodec.request(new PushBatch("a", 1, 2, 1, true, true, 9, List.of())).toBuilder()
                .addDeltas(Delta.newBuilder().setKey(CatalogCodec.key(KEY)).setMedium(io.orbitkv.server.cluster.proto.Medium.SSD)
                        .setAdded(true).setSequence(1).setLengthBytes(-1)).build();
        assertThatThrownBy(() -> CatalogCodec.batch(request)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void theHandoffEndAndTheNewUnknownReasonsCrossTheWire() {
        PushBatch end = new PushBatch("a", 1, 2, 7, false, false, 42, List.of(), true);
        assertThat(CatalogCodec.batch(CatalogCodec.request(end))).isEqualTo(end);
        assertThat(CatalogCodec.batch(CatalogCodec.request(new PushBatch("a", 1, 2, 8, false, false, 42, List.of()))).handoffEnd())
                .isFalse();
        for (KeyLocation.UnknownReason r : List.of(KeyLocation.UnknownReason.STALE_PLACEMENT, KeyLocation.UnknownReason.HANDOFF,
                KeyLocation.UnknownReason.LOOKUP_LIMIT)) {
            KeyLocation u = new KeyLocation.Unknown(r);
            assertThat(CatalogCodec.location(CatalogCodec.result(u))).isEqualTo(u);
        }
        var fromNewerPeer = io.orbitkv.server.cluster.proto.KeyResult.newBuilder()
                .setUnknown(io.orbitkv.server.cluster.proto.Unknown.newBuilder().setReason("SOMETHING_NEW")).build();
        assertThat(CatalogCodec.location(fromNewerPeer)).as("a reason this node does not know is still Unknown")
                .isEqualTo(new KeyLocation.Unknown(KeyLocation.UnknownReason.UNREACHABLE));
    }
}
