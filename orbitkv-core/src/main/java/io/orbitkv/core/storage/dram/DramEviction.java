package io.orbitkv.core.storage.dram;

import java.util.Locale;

/**
 * Which resident image the DRAM tier evicts when its index is full.
 *
 * <ul>
 *   <li>{@link #W_TINY_LFU}: Caffeine's W-TinyLFU under the byte bound: a newcomer enters only if
 *       its estimated frequency beats the victim's, so frequently reused images survive one-off
 *       scans.</li>
 *   <li>{@link #LRU}: the least recently published or used image goes first ({@code LruPolicy}'s
 *       exact recency list; Caffeine stays the index). Every newcomer is admitted.</li>
 *   <li>{@link #CHAIN}: leaf-first over the prefix forest that publishers' {@link ChainLink}s
 *       describe (a page with a resident successor in its chain is not a victim while a leaf is),
 *       leaves ranked by a reuse value learned from the traffic ({@code ChainPolicy}). Every
 *       newcomer is admitted.</li>
 * </ul>
 *
 * <p>Design note, measured by {@code bin/bench-trace} on the Mooncake conversation trace (12,031
 * requests, 182,790 distinct 512-token blocks, docs/performance.md "Trace replay"): 76 % of the
 * blocks are referenced once, and most reuse is the next turn of a conversation reading the
 * previous turn's blocks a few minutes later. W-TinyLFU refuses those blocks on their first
 * reference (frequency 1 against residents of frequency 1 or more) and its hill climber adapts
 * its 1 % window too slowly over 288,500 references, so it served 0.147 of prompt tokens at 5 %
 * capacity against LRU's 0.199 (offline, same access pattern), and 0.257 against 0.360 at 25 %.
 * W-TinyLFU stays for workloads of hot prefixes among one-off scans. CHAIN, the Manager's default,
 * served at least what LRU serves at every capacity (5-50 %) of both halves of that trace and of
 * three variants, 1.000-1.086 × LRU (docs/performance.md, "Cache quality: the Manager's chain-aware
 * DRAM policy").
 */
public enum DramEviction {
    W_TINY_LFU,
    LRU,
    CHAIN;

    /** Parses {@code w-tinylfu}, {@code lru} or {@code chain} (case-insensitive). */
    public static DramEviction parse(String text) {
        return switch (text.strip().toLowerCase(Locale.ROOT)) {
            case "w-tinylfu" -> W_TINY_LFU;
            case "lru" -> LRU;
            case "chain" -> CHAIN;
            default -> throw new IllegalArgumentException("DRAM eviction must be w-tinylfu, lru or chain: '" + text + "'");
        };
    }

    /** The configuration word: {@code w-tinylfu}, {@code lru} or {@code chain}. */
    public String word() {
        return switch (this) {
            case W_TINY_LFU -> "w-tinylfu";
            case LRU -> "lru";
            case CHAIN -> "chain";
        };
    }
}
