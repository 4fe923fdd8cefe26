package io.orbitkv.core.peer;

import java.util.Objects;

/**
 * Where to reach one live member for peer reads.
 *
 * @param node    the member and the incarnation the requester planned against
 * @param address transport address ({@code host:port} for gRPC/TCP)
 */
public record PeerEndpoint(NodeIncarnation node, String address) {

    public PeerEndpoint {
        Objects.requireNonNull(node, "node");
        Objects.requireNonNull(address, "address");
        if (address.isBlank()) throw new IllegalArgumentException("address is blank");
    }
}
