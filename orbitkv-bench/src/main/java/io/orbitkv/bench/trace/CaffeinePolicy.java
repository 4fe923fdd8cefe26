package io.orbitkv.bench.trace;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import com.github.benmanes.caffeine.cache.RemovalCause;
import java.util.function.LongConsumer;

/**
 * An offline model of the Manager's DRAM index: a Caffeine cache (W-TinyLFU) bounded to the
 * capacity in blocks, used the way the Manager uses its index for one request: the QUERY reads
 * the cached prefix block by block until the first miss (each read is a use the policy sees),
 * then PUBLISH inserts the blocks that are not cached (a block already cached is answered
 * "already resident" without a use). It lets a policy question be asked in a second instead of
 * a replay; the replay against a real Manager is what the results table reports.
 */
public final class CaffeinePolicy implements CachePolicy {

    private final int capacityBlocks;
    private final Cache<Long, Boolean> blocks;

    public CaffeinePolicy(int capacityBlocks) {
        this(capacityBlocks, id -> { });
    }

    /**
     * As above, telling {@code evicted} each block the policy evicts (or refuses at admission),
     * synchronously inside {@link #access}: the routing simulator turns these into KV events.
     */
    public CaffeinePolicy(int capacityBlocks, LongConsumer evicted) {
        this.capacityBlocks = CachePolicy.requireCapacity(capacityBlocks);
        this.blocks = Caffeine.newBuilder().maximumSize(capacityBlocks).executor(Runnable::run)
                .evictionListener((Long id, Boolean v, RemovalCause cause) -> {
                    if (id != null && cause.wasEvicted()) evicted.accept(id);
                })
                .build();
    }

    @Override
    public String name() {
        return "Caffeine (offline)";
    }

    @Override
    public int capacityBlocks() {
        return capacityBlocks;
    }

    @Override
    public int size() {
        blocks.cleanUp();
        return (int) blocks.estimatedSize();
    }

    @Override
    public int hitBlocks(TraceRequest r) {
        return CachePolicy.cachedPrefix(r, id -> blocks.policy().getIfPresentQuietly(id) != null);
    }

    @Override
    public void access(TraceRequest r) {
        int k = 0;
        while (k < r.blocks() && blocks.getIfPresent(r.block(k)) != null) k++;
        for (int i = k; i < r.blocks(); i++) {
            if (blocks.policy().getIfPresentQuietly(r.block(i)) == null) blocks.put(r.block(i), Boolean.TRUE);
        }
        blocks.cleanUp();
    }
}
