package io.orbitkv.bench.trace;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.LongConsumer;

/**
 * Least-recently-used over blocks: every referenced block moves to the most recent end, a
 * missing one is always admitted, and the least recent block is evicted past the capacity.
 * Blocks of one request are referenced in chain order, so of equally recent blocks the chain's
 * first is evicted first (measured on the conversation trace: referencing them in reverse order
 * changes the hit ratio by under 0.001 at 5-50 % capacity, so the order is not what LRU lacks).
 */
public final class LruPolicy implements CachePolicy {

    private final int capacityBlocks;
    private final LinkedHashMap<Long, Boolean> blocks;
    /** Per reference, whether the block is referenced again later; null for plain LRU. */
    private final boolean[] reusedLater;
    private int position;

    public LruPolicy(int capacityBlocks) {
        this(capacityBlocks, null, id -> { });
    }

    /** Plain LRU telling {@code evicted} each block it evicts, synchronously inside {@link #access}. */
    public LruPolicy(int capacityBlocks, LongConsumer evicted) {
        this(capacityBlocks, null, evicted);
    }

    /**
     * LRU that admits a missing block only if it will be referenced again (an oracle, not an
     * online policy): what a perfect reuse prediction at admission would add to LRU. Must then be
     * fed exactly {@code trace}, in order.
     */
    public static LruPolicy withOracleAdmission(int capacityBlocks, java.util.List<TraceRequest> trace) {
        java.util.Map<Long, Boolean> seen = new java.util.HashMap<>();
        int references = trace.stream().mapToInt(TraceRequest::blocks).sum();
        boolean[] later = new boolean[references];
        int p = references;
        for (int q = trace.size() - 1; q >= 0; q--) {
            TraceRequest r = trace.get(q);
            for (int i = r.blocks() - 1; i >= 0; i--) later[--p] = seen.put(r.block(i), Boolean.TRUE) != null;
        }
        return new LruPolicy(capacityBlocks, later, id -> { });
    }

    private LruPolicy(int capacityBlocks, boolean[] reusedLater, LongConsumer evicted) {
        this.reusedLater = reusedLater;
        this.capacityBlocks = CachePolicy.requireCapacity(capacityBlocks);
        this.blocks = new LinkedHashMap<>(16, 0.75f, true) {
            private static final long serialVersionUID = 1L;

            @Override
            protected boolean removeEldestEntry(Map.Entry<Long, Boolean> eldest) {
                boolean evict = size() > LruPolicy.this.capacityBlocks;
                if (evict) evicted.accept(eldest.getKey());
                return evict;
            }
        };
    }

    @Override
    public String name() {
        return reusedLater == null ? "LRU" : "LRU + oracle admission";
    }

    @Override
    public int capacityBlocks() {
        return capacityBlocks;
    }

    @Override
    public int size() {
        return blocks.size();
    }

    @Override
    public int hitBlocks(TraceRequest r) {
        return CachePolicy.cachedPrefix(r, blocks::containsKey);
    }

    @Override
    public void access(TraceRequest r) {
        for (int i = 0; i < r.blocks(); i++) {
            boolean admit = reusedLater == null || reusedLater[position++];
            if (blocks.get(r.block(i)) == null && admit) blocks.put(r.block(i), Boolean.TRUE);
        }
    }
}
