package io.orbitkv.server.peer;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.core.peer.AuthorizeRequest;
import io.orbitkv.core.peer.NodeIncarnation;
import io.orbitkv.core.peer.PeerMedium;
import io.orbitkv.server.peer.proto.AuthorizeCall;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/** {@link PeerWire}'s decoding is total: a call it cannot honour is {@code Optional.empty()}, never an exception. */
class PeerWireTest {

    private static final AuthorizeRequest REQUEST = new AuthorizeRequest(new NodeIncarnation("node-b", 2), 3,
            StateKey.ofBytes(new byte[32]), NamespaceDigest.ofBytes(new byte[32]), PeerMedium.SSD, 5, 6);

    @Test
    void aCallRoundTrips() {
        assertThat(PeerWire.decode(PeerWire.encode(REQUEST))).contains(REQUEST);
    }

    /** Found by the fuzz campaign (target peer): a negative generation threw from the request's constructor. */
    @Test
    void aNegativeGenerationIsRefusedNotThrown() {
        AuthorizeCall call = PeerWire.encode(REQUEST).toBuilder().setGeneration(-7).build();
        assertThat(PeerWire.decode(call)).isEqualTo(Optional.empty());
    }
}
