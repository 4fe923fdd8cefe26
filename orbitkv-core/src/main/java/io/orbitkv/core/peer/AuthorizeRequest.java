package io.orbitkv.core.peer;

import io.orbitkv.state.NamespaceDigest;
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
 * @param generation         the generation on that medium the evidence names, or
 *                           {@link #CURRENT_GENERATION} when the evidence carries none (the
 *                           catalog's holders do not): the source then pins whatever image of the
 *                           key it holds now, which is safe because a key's bytes are immutable
 *                           (the StateKey is a content identity within its namespace) and the
 *                           residency sequence is still checked
 * @param residencySequence  the source residency sequence the evidence was current at (≥ 1)
 */
public record AuthorizeRequest(NodeIncarnation requester, long sourceIncarnation, StateKey key,
                               NamespaceDigest namespace, PeerMedium medium, long generation,
                               long residencySequence) {

    /** "Any generation the source holds now": DRAM image ids and SSD generations start at 1. */
    public static final long CURRENT_GENERATION = 0;

    public AuthorizeRequest {
        Objects.requireNonNull(requester, "requester");
        Objects.requireNonNull(key, "key");
        Objects.requireNonNull(namespace, "namespace");
        Objects.requireNonNull(medium, "medium");
        if (sourceIncarnation <= 0) throw new IllegalArgumentException("sourceIncarnation: " + sourceIncarnation);
        if (residencySequence <= 0) throw new IllegalArgumentException("residencySequence: " + residencySequence);
        if (generation < 0) throw new IllegalArgumentException("generation: " + generation);
    }

    /** True when the requester names no exact generation (see {@link #CURRENT_GENERATION}). */
    public boolean anyGeneration() {
        return generation == CURRENT_GENERATION;
    }
}
