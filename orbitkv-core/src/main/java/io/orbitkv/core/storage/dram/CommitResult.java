package io.orbitkv.core.storage.dram;

/**
 * Outcome of {@link DramTier#commit}. Pages are immutable, so the first committed image of a key
 * wins: a later commit of the same key frees its own slot and reports the resident image.
 */
public sealed interface CommitResult {

    /** The reservation's image is now resident and readable under {@code imageId}. */
    record Inserted(long imageId) implements CommitResult {
    }

    /** The key was already resident as {@code residentImageId}; the reservation's slot was freed. */
    record Duplicate(long residentImageId) implements CommitResult {
    }

    /** The reservation had already been committed or aborted; nothing changed. */
    record NotOpen() implements CommitResult {
    }
}
