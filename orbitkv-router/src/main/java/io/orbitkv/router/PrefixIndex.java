package io.orbitkv.router;

import java.util.Iterator;
import java.util.LinkedHashMap;

/**
 * Which worker's host holds which block in which {@link Tier}: per block key, one bit per worker
 * and tier. Fed by KV events (and nothing else: a block no event announced is not here), read by
 * {@link #cover} when a request is routed.
 *
 * <p>Owns its map. Not thread-safe: the {@link Router} that owns it confines it to the caller
 * that serialises routing and event delivery.
 *
 * <p>Bounds: at most {@link #MAX_WORKERS} workers (a bit per worker in a {@code long}) and
 * {@code maxBlocks} blocks. Past the block bound the oldest stored block is forgotten
 * ({@link #evictedTotal()} counts them): the index is a hint, so forgetting costs a missed hit,
 * never a wrong one. A block stored again counts as new (it moves to the young end), so blocks
 * that stay hot stay indexed.
 *
 * <p>Design note: about 100 B per block (map node, boxed key, holder masks), so the default bound of
 * 1,000,000 blocks (8.6 TB of KV at the 4 MiB of a 512-token block of an 8 KiB/token model) costs
 * ~100 MB of heap; the alternative, a chain trie, would save the repeated key per block but needs
 * parent links that OrbitKV's events do not carry ({@code parent_block_hash} is nil).
 */
public final class PrefixIndex {

    /** Most workers one index tracks. */
    public static final int MAX_WORKERS = 64;

    private static final class Holders {
        long hbm;
        long dram;
        long ssd;

        long local() {
            return hbm | dram;
        }

        boolean empty() {
            return (hbm | dram | ssd) == 0;
        }
    }

    private final int maxBlocks;
    private final LinkedHashMap<Long, Holders> blocks = new LinkedHashMap<>();
    private long evictedTotal;

    public PrefixIndex(int maxBlocks) {
        if (maxBlocks < 1) throw new IllegalArgumentException("maxBlocks must be >= 1: " + maxBlocks);
        this.maxBlocks = maxBlocks;
    }

    public int maxBlocks() {
        return maxBlocks;
    }

    /** Blocks indexed now (held by at least one worker in one tier). */
    public int size() {
        return blocks.size();
    }

    /** Blocks forgotten because the index was full. */
    public long evictedTotal() {
        return evictedTotal;
    }

    /** Worker {@code worker}'s host now holds {@code key} in {@code tier}. */
    public void stored(int worker, Tier tier, long key) {
        long bit = bit(worker);
        Holders h = blocks.remove(key);
        if (h == null) {
            h = new Holders();
            if (blocks.size() >= maxBlocks) evictOldest();
        }
        switch (tier) {
            case HBM -> h.hbm |= bit;
            case DRAM -> h.dram |= bit;
            case SSD -> h.ssd |= bit;
        }
        blocks.put(key, h);
    }

    /** Worker {@code worker}'s host no longer holds {@code key} in {@code tier}. */
    public void removed(int worker, Tier tier, long key) {
        long bit = bit(worker);
        Holders h = blocks.get(key);
        if (h == null) return;
        switch (tier) {
            case HBM -> h.hbm &= ~bit;
            case DRAM -> h.dram &= ~bit;
            case SSD -> h.ssd &= ~bit;
        }
        if (h.empty()) blocks.remove(key);
    }

    /** Forgets everything worker {@code worker} held (a restart, lost events); time proportional to the index. */
    public void clearWorker(int worker) {
        long keep = ~bit(worker);
        for (Iterator<Holders> it = blocks.values().iterator(); it.hasNext(); ) {
            Holders h = it.next();
            h.hbm &= keep;
            h.dram &= keep;
            h.ssd &= keep;
            if (h.empty()) it.remove();
        }
    }

    /** Whether worker {@code worker} holds {@code key} in {@code tier} (for tests and diagnostics). */
    public boolean holds(int worker, Tier tier, long key) {
        Holders h = blocks.get(key);
        if (h == null) return false;
        long mask = switch (tier) {
            case HBM -> h.hbm;
            case DRAM -> h.dram;
            case SSD -> h.ssd;
        };
        return (mask & bit(worker)) != 0;
    }

    /**
     * For each of the first {@code workers} workers, how it would obtain the prefix {@code chain}
     * (see {@link Coverage}), trusting only the holdings of workers whose bit is set in
     * {@code trustedMask}: an untrusted worker is covered as holding nothing and serves no peer.
     * Work is proportional to {@code chain.length × workers} and stops at the first block no trusted
     * worker holds.
     */
    public Coverage[] cover(long[] chain, int workers, long trustedMask) {
        if (workers < 1 || workers > MAX_WORKERS) throw new IllegalArgumentException("workers out of range: " + workers);
        int[] local = new int[workers];
        int[] localSsd = new int[workers];
        int[] peerDram = new int[workers];
        int[] peerSsd = new int[workers];
        int[] localPrefix = new int[workers];
        long alive = workers == 64 ? -1L : (1L << workers) - 1;
        long prefixAlive = alive;
        for (long key : chain) {
            if (alive == 0) break;
            Holders h = blocks.get(key);
            if (h == null) break;
            long trustedLocal = h.local() & trustedMask;
            long trustedSsd = h.ssd & trustedMask;
            long dramSources = h.dram & trustedMask;
            for (long rest = alive; rest != 0; rest &= rest - 1) {
                int w = Long.numberOfTrailingZeros(rest);
                long bit = 1L << w;
                if ((trustedLocal & bit) != 0) {
                    local[w]++;
                    if ((prefixAlive & bit) != 0) localPrefix[w]++;
                } else if ((trustedSsd & bit) != 0) {
                    localSsd[w]++;
                    if ((prefixAlive & bit) != 0) localPrefix[w]++;
                } else if ((dramSources & ~bit) != 0) {
                    peerDram[w]++;
                    prefixAlive &= ~bit;
                } else if ((trustedSsd & ~bit) != 0) {
                    peerSsd[w]++;
                    prefixAlive &= ~bit;
                } else {
                    alive &= ~bit;
                }
            }
        }
        Coverage[] out = new Coverage[workers];
        for (int w = 0; w < workers; w++) {
            out[w] = new Coverage(local[w], localSsd[w], peerDram[w], peerSsd[w], localPrefix[w]);
        }
        return out;
    }

    private void evictOldest() {
        Iterator<Long> it = blocks.keySet().iterator();
        it.next();
        it.remove();
        evictedTotal++;
    }

    private static long bit(int worker) {
        if (worker < 0 || worker >= MAX_WORKERS) throw new IllegalArgumentException("worker out of range: " + worker);
        return 1L << worker;
    }
}
