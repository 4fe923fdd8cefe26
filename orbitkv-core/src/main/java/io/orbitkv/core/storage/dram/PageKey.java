package io.orbitkv.core.storage.dram;

import io.orbitkv.state.StateKey;

import java.util.Objects;

/**
 * The identity of one page image in the {@link DramTier}: the Manager's small id of the namespace
 * it was published in and its key. Two namespaces holding the same key bytes hold two images.
 *
 * <p>Immutable. One per resident image (the index's key), so it stores the key's four words
 * inline beside the id rather than referring to a {@link StateKey}: 48 bytes on a compressed-oops
 * heap, what the key alone took when the index was keyed by it ({@link #key()} builds the key
 * again, on insertions and removals only).
 */
public final class PageKey {

    private final int namespaceId;
    private final long w0;
    private final long w1;
    private final long w2;
    private final long w3;

    /** {@code key}'s page in namespace {@code namespaceId}. */
    public PageKey(int namespaceId, StateKey key) {
        Objects.requireNonNull(key, "key");
        this.namespaceId = namespaceId;
        this.w0 = key.word(0);
        this.w1 = key.word(1);
        this.w2 = key.word(2);
        this.w3 = key.word(3);
    }

    /** The Manager's small id of the page's namespace. */
    public int namespaceId() {
        return namespaceId;
    }

    /** The page's key (a new instance equal to the one given). */
    public StateKey key() {
        return StateKey.ofWords(w0, w1, w2, w3);
    }

    /** Whether this is a page of {@code key} (in any namespace). */
    public boolean hasKey(StateKey key) {
        return key.word(0) == w0 && key.word(1) == w1 && key.word(2) == w2 && key.word(3) == w3;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof PageKey p && p.namespaceId == namespaceId && p.w0 == w0 && p.w1 == w1 && p.w2 == w2
                && p.w3 == w3;
    }

    @Override
    public int hashCode() {
        // The key's words are uniform (SHA-256): any 32 bits hash well; the id spreads two
        // namespaces' images of one key.
        return (int) (w0 ^ (w0 >>> 32)) ^ (namespaceId * 0x9E3779B9);
    }

    @Override
    public String toString() {
        return namespaceId + "/" + key();
    }
}
