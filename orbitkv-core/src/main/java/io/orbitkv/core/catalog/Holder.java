package io.orbitkv.core.catalog;

import io.orbitkv.core.storage.residency.ResidencyEvent;
import java.util.Objects;

/**
 * Catalog evidence that a node holds a key: which node (and incarnation), on which medium, as of
 * which of that node's residency sequences, and the page's payload length ({@code lengthBytes},
 * 0 = unknown: evidence from a source that did not send it). Evidence, not a promise: the holder
 * still authorizes any read against its live state.
 */
public record Holder(String nodeId, long incarnation, ResidencyEvent.Medium medium, long sequence, int lengthBytes) {
    public Holder {
        Member.requireNodeId(nodeId);
        Objects.requireNonNull(medium, "medium");
        if (incarnation < 1) throw new IllegalArgumentException("incarnation must be >= 1");
        if (sequence < 1) throw new IllegalArgumentException("sequence must be >= 1");
        if (lengthBytes < 0) throw new IllegalArgumentException("lengthBytes must be >= 0 (0 = unknown)");
    }

    /** Evidence without a length (0 = unknown). */
    public Holder(String nodeId, long incarnation, ResidencyEvent.Medium medium, long sequence) {
        this(nodeId, incarnation, medium, sequence, 0);
    }
}
