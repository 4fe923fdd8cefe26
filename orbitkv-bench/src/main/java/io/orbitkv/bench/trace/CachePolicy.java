package io.orbitkv.bench.trace;

/**
 * An offline prefix cache of whole blocks, fed one request at a time in trace order. The
 * {@link PrefixSimulator} asks {@link #hitBlocks} (the longest cached prefix of the request's
 * chain, before the request changes anything), then calls {@link #access}: every block of the
 * chain is referenced in chain order, cached ones are used, missing ones offered for admission.
 *
 * <p>Capacities are in blocks. Implementations are single-threaded and hold at most their
 * capacity in blocks.
 */
public sealed interface CachePolicy permits LruPolicy, BeladyPolicy, CaffeinePolicy, ChainAwarePolicy {

    /** A short name for tables and charts. */
    String name();

    /** Blocks this cache may hold. */
    int capacityBlocks();

    /** Blocks cached now. */
    int size();

    /** The longest prefix of {@code r}'s chain whose blocks are all cached (a block past a missing one does not count). */
    int hitBlocks(TraceRequest r);

    /** References every block of {@code r} in chain order: cached ones are used, missing ones offered for admission. */
    void access(TraceRequest r);

    /** Blocks of {@code r}'s chain, from the first, for which {@code cached} holds, up to the first for which it does not. */
    static int cachedPrefix(TraceRequest r, java.util.function.LongPredicate cached) {
        int k = 0;
        while (k < r.blocks() && cached.test(r.block(k))) k++;
        return k;
    }

    /** Fails on a capacity below one block. */
    static int requireCapacity(int capacityBlocks) {
        if (capacityBlocks < 1) throw new IllegalArgumentException("capacity must be >= 1 block: " + capacityBlocks);
        return capacityBlocks;
    }
}
