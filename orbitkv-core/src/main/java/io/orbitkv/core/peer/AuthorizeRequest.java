package io.orbitkv.core.peer;

import io.orbitkv.core.storage.ssd.NamespaceDigest;
import io.orbitkv.state.StateKey;

import java.util.Objects;

/**
 * A requester's ask to read one page from a source, carrying the evidence it planned with.
 *
 * @param requester          who asks (its current incarnation)
 * @param sourceIncarnation  the source incarnation the requester's evidence came from
 * @param key                the page
 * @param namespace          the namespace the requester expects the page to belong to
 * @param medium             where the evidence says the page is
 * @param generation         the generation on that medium the evidence names
 * @param residencySequence  the source residency sequence the evidence was current at (≥ 1)
 */
public record AuthorizeRequest(NodeIncarnation requester, long sourceIncarnation, StateKey key,
                               NamespaceDigest namespace, PeerMedium medium, long generation,
                               long residencySequence) {

    public AuthorizeRequest {
        Objects.requireNonNull(requester, "requester");
        Objects.requireNonNull(key, "key");
        Objects.requireNonNull(namespace, "namespace");
        Objects.requireNonNull(medium, "medium");
        if (sourceIncarnation <= 0) throw new IllegalArgumentException("sourceIncarnation: " + sourceIncarnation);
        if (residencySequence <= 0) throw new IllegalArgumentException("residencySequence: " + residencySequence);
    }
}
