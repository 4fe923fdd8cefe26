package io.orbitkv.core.storage.dram;

import io.orbitkv.state.StateKey;

import java.util.Objects;

/**
 * The identity of one page image in the {@link DramTier}: the Manager's small id of the namespace
 * it was published in and its key. Two namespaces holding the same key bytes hold two images.
 *
 * <p>Immutable. One per resident image (the index's key), so it refers to the {@link StateKey}
 * rather than copying it: 24 bytes on a compressed-oops heap.
 *
 * @param namespaceId the Manager's small id of the namespace
 * @param key         the page's key
 */
public record PageKey(int namespaceId, StateKey key) {

    /** Checks the key is present. */
    public PageKey {
        Objects.requireNonNull(key, "key");
    }

    @Override
    public int hashCode() {
        // The key's hash is uniform (SHA-256); the id spreads two namespaces' images of one key.
        return key.hashCode() ^ (namespaceId * 0x9E3779B9);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof PageKey p && p.namespaceId == namespaceId && p.key.equals(key);
    }
}
