package io.orbitkv.core.peer;

import io.orbitkv.core.storage.ssd.ExtentLayout;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;

import java.util.Objects;

/**
 * Catalog evidence that one peer holds one page: the input of a peer read.
 *
 * @param source            the owner and its incarnation when the evidence was produced
 * @param key               the page
 * @param namespace         the page's namespace
 * @param medium            where the owner holds it
 * @param generation        the generation on that medium
 * @param residencySequence the owner's residency sequence of the evidence (≥ 1)
 * @param lengthBytes       the page's payload length from the evidence; 0 = unknown (a source that
 *                          did not send it)
 */
public record PeerCandidate(PeerEndpoint source, StateKey key, NamespaceDigest namespace, PeerMedium medium,
                            long generation, long residencySequence, int lengthBytes) {

    public PeerCandidate {
        Objects.requireNonNull(source, "source");
        Objects.requireNonNull(key, "key");
        Objects.requireNonNull(namespace, "namespace");
        Objects.requireNonNull(medium, "medium");
        if (residencySequence <= 0) throw new IllegalArgumentException("residencySequence: " + residencySequence);
        if (lengthBytes < 0) throw new IllegalArgumentException("lengthBytes: " + lengthBytes);
    }

    /** A candidate whose page length is unknown (0). */
    public PeerCandidate(PeerEndpoint source, StateKey key, NamespaceDigest namespace, PeerMedium medium,
                         long generation, long residencySequence) {
        this(source, key, namespace, medium, generation, residencySequence, 0);
    }

    /**
     * Staging budget a fetch of this page is charged: its payload rounded up to the 4 KiB block
     * ({@link ExtentLayout#paddedPayloadBytes}, as a local SSD staging is charged), at most
     * {@code unknownBytes}; {@code unknownBytes} (the largest DRAM slot) when the length is unknown.
     */
    public long stagingBytes(long unknownBytes) {
        return lengthBytes == 0 ? unknownBytes : Math.min(unknownBytes, ExtentLayout.paddedPayloadBytes(lengthBytes));
    }

    /** The route this candidate is taken on. */
    public ReadRoute route() {
        return switch (medium) {
            case DRAM -> ReadRoute.PEER_DRAM;
            case SSD -> ReadRoute.PEER_SSD;
        };
    }

    /** The owner's node id. */
    public String ownerId() {
        return source.node().nodeId();
    }
}
