package io.orbitkv.router;

/**
 * The cost constants measured on this project's development machine (2 shared vCPUs, virtio disk;
 * docs/performance.md), each with the figure it comes from. The router's defaults and the routing
 * simulator's ({@code bin/bench-route}) both start from these; both take flags to override each.
 */
public final class MeasuredCosts {

    /**
     * KV bytes per token of the llama.cpp bench model: 2,816 KiB restored for 352 tokens (TTFT
     * table, "DRAM full-prefix hit") = 8,192 B.
     */
    public static final long KV_BYTES_PER_TOKEN = 8_192;
    /** llama.cpp bench model on one thread: cold TTFT p50 354.9 ms for 368 prompt tokens (TTFT table, "cold"). */
    public static final double PREFILL_TOKENS_PER_SECOND = 1_037;
    /** Manager restore of 32 × 2 MiB pages into an engine region: 12.60 GB/s (Manager table). */
    public static final double DRAM_BYTES_PER_SECOND = 12.60e9;
    /** SSD tier read, 256 KiB extents at QD 16 on the io_uring route: 1,001 MB/s (storage table). */
    public static final double SSD_BYTES_PER_SECOND = 1.001e9;
    /** First-query peer hit between two Manager processes, 64 × 256 KiB: 0.57 GB/s at p50 (peer table). */
    public static final double PEER_BYTES_PER_SECOND = 0.57e9;
    /** The catalog lookup of a first-query peer hit, 8–17 ms per batch in the same run's breakdown: 12.5 ms. */
    public static final double PEER_FIXED_SECONDS = 0.0125;

    private MeasuredCosts() {}

    /** A cost model of these figures for blocks of {@code blockTokens} tokens. */
    public static CostModel forBlocks(int blockTokens) {
        return new CostModel(blockTokens, blockTokens * KV_BYTES_PER_TOKEN, DRAM_BYTES_PER_SECOND, SSD_BYTES_PER_SECOND,
                PEER_BYTES_PER_SECOND, PEER_FIXED_SECONDS, PREFILL_TOKENS_PER_SECOND);
    }
}
