package io.orbitkv.core.catalog;

import io.orbitkv.core.storage.ResidencyEvent;
import java.util.Objects;

/**
 * Catalog evidence that a node holds a key: which node (and incarnation), on which medium, as of
 * which of that node's residency sequences. Evidence, not a promise: the holder still authorizes
 * any read against its live state.
 */
public record Holder(String nodeId, long incarnation, ResidencyEvent.Medium medium, long sequence) {
    public Holder {
        Member.requireNodeId(nodeId);
        Objects.requireNonNull(medium, "medium");
        if (incarnation < 1) throw new IllegalArgumentException("incarnation must be >= 1");
        if (sequence < 1) throw new IllegalArgumentException("sequence must be >= 1");
    }
}
