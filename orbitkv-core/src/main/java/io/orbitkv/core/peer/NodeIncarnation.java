package io.orbitkv.core.peer;

import java.util.Objects;

/**
 * One life of one Manager: its stable node id and the incarnation it registered in membership.
 * A restarted Manager keeps its node id and gets a larger incarnation, so evidence (residency,
 * tickets) from an earlier life can be told apart and refused.
 *
 * @param nodeId      stable node id, 1..128 characters
 * @param incarnation positive, strictly larger for each new life of {@code nodeId}
 */
public record NodeIncarnation(String nodeId, long incarnation) {

    public NodeIncarnation {
        Objects.requireNonNull(nodeId, "nodeId");
        if (nodeId.isEmpty() || nodeId.length() > 128) throw new IllegalArgumentException("nodeId length: " + nodeId);
        if (incarnation <= 0) throw new IllegalArgumentException("incarnation must be positive: " + incarnation);
    }
}
