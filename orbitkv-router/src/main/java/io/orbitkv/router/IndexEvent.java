package io.orbitkv.router;

/**
 * A KV event as the index applies it: vLLM's {@code BlockStored}, {@code BlockRemoved} and
 * {@code AllBlocksCleared} (docs/kv-events.md) with block hashes already turned into
 * {@link BlockKeys} and the medium into a {@link Tier}.
 */
public sealed interface IndexEvent {

    /** The worker's host now holds {@code keys} in {@code tier}. */
    record Stored(long[] keys, Tier tier) implements IndexEvent {
        public Stored {
            keys = keys.clone();
            if (keys.length == 0) throw new IllegalArgumentException("Stored needs at least one block");
            java.util.Objects.requireNonNull(tier, "tier");
        }
    }

    /** The worker's host no longer holds {@code keys} in {@code tier}. */
    record Removed(long[] keys, Tier tier) implements IndexEvent {
        public Removed {
            keys = keys.clone();
            if (keys.length == 0) throw new IllegalArgumentException("Removed needs at least one block");
            java.util.Objects.requireNonNull(tier, "tier");
        }
    }

    /** Everything the worker's host was known to hold is gone. */
    record Cleared() implements IndexEvent {
    }
}
