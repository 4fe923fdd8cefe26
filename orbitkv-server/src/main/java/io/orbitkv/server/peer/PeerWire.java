package io.orbitkv.server.peer;

import com.google.protobuf.ByteString;
import io.orbitkv.core.peer.AuthorizeRequest;
import io.orbitkv.core.peer.NodeIncarnation;
import io.orbitkv.core.peer.PeerMedium;
import io.orbitkv.server.peer.proto.AuthorizeCall;
import io.orbitkv.server.peer.proto.PageMedium;
import io.orbitkv.server.peer.proto.Requester;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;

import java.lang.foreign.MemorySegment;
import java.util.Optional;

/**
 * Conversions between the core peer values and the {@code peer.proto} messages, in one place.
 * Decoding is total: a malformed message decodes to {@link Optional#empty()} and the service
 * answers it as a refusal, never as an exception thrown at the peer.
 *
 * <p>Public, with {@link #encode} and {@link #decode}, for fuzzing and conformance tools (the
 * reliability module's {@code peer} fuzz target drives this decoder, the one the service runs).
 */
public final class PeerWire {

    private PeerWire() {
    }

    static Requester requester(NodeIncarnation n) {
        return Requester.newBuilder().setNodeId(n.nodeId()).setIncarnation(n.incarnation()).build();
    }

    static Optional<NodeIncarnation> requester(Requester r) {
        if (r.getNodeId().isEmpty() || r.getNodeId().length() > 128 || r.getIncarnation() <= 0) return Optional.empty();
        return Optional.of(new NodeIncarnation(r.getNodeId(), r.getIncarnation()));
    }

    public static AuthorizeCall encode(AuthorizeRequest r) {
        byte[] digest = new byte[NamespaceDigest.BYTES];
        r.namespace().write(MemorySegment.ofArray(digest), 0);
        return AuthorizeCall.newBuilder()
                .setRequester(requester(r.requester()))
                .setSourceIncarnation(r.sourceIncarnation())
                .setKey(ByteString.copyFrom(r.key().toBytes()))
                .setNamespaceDigest(ByteString.copyFrom(digest))
                .setMedium(switch (r.medium()) {
                    case DRAM -> PageMedium.PAGE_DRAM;
                    case SSD -> PageMedium.PAGE_SSD;
                })
                .setGeneration(r.generation())
                .setResidencySequence(r.residencySequence())
                .build();
    }

    public static Optional<AuthorizeRequest> decode(AuthorizeCall c) {
        Optional<NodeIncarnation> requester = requester(c.getRequester());
        if (requester.isEmpty() || c.getKey().size() != StateKey.BYTES || c.getNamespaceDigest().size() != NamespaceDigest.BYTES
                || c.getSourceIncarnation() <= 0 || c.getResidencySequence() <= 0 || c.getGeneration() < 0) {
            return Optional.empty();
        }
        PeerMedium medium = switch (c.getMedium()) {
            case PAGE_DRAM -> PeerMedium.DRAM;
            case PAGE_SSD -> PeerMedium.SSD;
            case PAGE_MEDIUM_UNSPECIFIED, UNRECOGNIZED -> null;
        };
        if (medium == null) return Optional.empty();
        return Optional.of(new AuthorizeRequest(requester.get(), c.getSourceIncarnation(),
                StateKey.ofBytes(c.getKey().toByteArray()), NamespaceDigest.ofBytes(c.getNamespaceDigest().toByteArray()),
                medium, c.getGeneration(), c.getResidencySequence()));
    }
}
