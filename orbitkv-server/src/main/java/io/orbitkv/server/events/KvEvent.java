package io.orbitkv.server.events;

import java.util.List;
import java.util.Objects;

/**
 * One KV cache event in vLLM's schema ({@code vllm.distributed.kv_events}, see
 * {@code docs/kv-events.md}): the three tagged event structs a {@code KVEventBatch} carries.
 * Records validate in their constructors, so an event that the schema cannot express is never
 * built.
 */
public sealed interface KvEvent {

    /**
     * Blocks became readable on {@code medium}.
     *
     * @param blockHashes     engine block hashes (raw bytes, msgpack bin), at least one
     * @param parentBlockHash the hash of the block before the first one; null when unknown
     * @param tokenIds        the tokens of the blocks; empty when the engine did not supply them
     * @param blockSize       tokens per block
     * @param loraId          vLLM's integer LoRA id; null when none or unknown
     * @param medium          where the blocks are ({@link KvEventPublisher#MEDIUM_DRAM}, {@link KvEventPublisher#MEDIUM_SSD})
     */
    record BlockStored(List<byte[]> blockHashes, byte[] parentBlockHash, int[] tokenIds, int blockSize, Integer loraId,
                       String medium) implements KvEvent {
        public BlockStored {
            blockHashes = List.copyOf(blockHashes);
            if (blockHashes.isEmpty()) throw new IllegalArgumentException("BlockStored needs at least one block hash");
            Objects.requireNonNull(tokenIds, "tokenIds (empty when unknown)");
            if (blockSize < 1) throw new IllegalArgumentException("blockSize must be >= 1: " + blockSize);
            Objects.requireNonNull(medium, "medium");
        }
    }

    /** Blocks stopped being readable on {@code medium}. */
    record BlockRemoved(List<byte[]> blockHashes, String medium) implements KvEvent {
        public BlockRemoved {
            blockHashes = List.copyOf(blockHashes);
            if (blockHashes.isEmpty()) throw new IllegalArgumentException("BlockRemoved needs at least one block hash");
            Objects.requireNonNull(medium, "medium");
        }
    }

    /** Everything the subscriber knew of this topic is gone (a new Manager run, or lost events). */
    record AllBlocksCleared() implements KvEvent {
    }
}
