package io.orbitkv.bench.route;

import io.orbitkv.router.CostModel;

/**
 * Every constant of the routing simulator's prefill and transfer models, each with the figure of
 * this machine it comes from (docs/performance.md, README "What is measured"). {@code bin/bench-route}
 * overrides each by a flag of the same name.
 *
 * @param blockTokens            tokens per trace block: the Mooncake trace's 512
 * @param kvBytesPerToken        llama.cpp bench model: 2,816 KiB restored for 352 tokens (TTFT table,
 *                               "DRAM full-prefix hit") = 8,192 B per token, so 4 MiB per block
 * @param prefillTokensPerSecond llama.cpp bench model, one thread: cold TTFT p50 354.9 ms for 368
 *                               prompt tokens = 1,037 tokens/s (TTFT table, "cold")
 * @param dramBytesPerSecond     Manager restore of 32 × 2 MiB pages into an engine region:
 *                               12.60 GB/s (Manager table, "Restore 32 × 2 MiB")
 * @param ssdBytesPerSecond      SSD tier read, 256 KiB extents at QD 16 on the io_uring route:
 *                               1,001 MB/s (storage table)
 * @param peerBytesPerSecond     first-query peer hit between two Manager processes, 64 × 256 KiB
 *                               pages: 0.57 GB/s at p50 (peer table; "0.4–0.5 GB/s" in its breakdown)
 * @param peerFixedSeconds       the catalog lookup of a first-query peer hit, 8–17 ms per batch in the
 *                               same breakdown: 12.5 ms
 */
public record RouteCosts(int blockTokens, long kvBytesPerToken, double prefillTokensPerSecond, double dramBytesPerSecond,
                         double ssdBytesPerSecond, double peerBytesPerSecond, double peerFixedSeconds) {

    public static final RouteCosts MEASURED = new RouteCosts(512, 8_192, 1_037, 12.60e9, 1.001e9, 0.57e9, 0.0125);

    public RouteCosts {
        if (kvBytesPerToken < 1) throw new IllegalArgumentException("kvBytesPerToken must be >= 1: " + kvBytesPerToken);
        costModel(blockTokens, kvBytesPerToken, prefillTokensPerSecond, dramBytesPerSecond, ssdBytesPerSecond,
                peerBytesPerSecond, peerFixedSeconds);
    }

    /** The router's and the simulated workers' cost model (they share it: the router's estimate is the simulator's truth). */
    public CostModel costModel() {
        return costModel(blockTokens, kvBytesPerToken, prefillTokensPerSecond, dramBytesPerSecond, ssdBytesPerSecond,
                peerBytesPerSecond, peerFixedSeconds);
    }

    public long bytesPerBlock() {
        return (long) blockTokens * kvBytesPerToken;
    }

    private static CostModel costModel(int blockTokens, long kvBytesPerToken, double rate, double dram, double ssd,
                                       double peer, double peerFixed) {
        return new CostModel(blockTokens, (long) blockTokens * kvBytesPerToken, dram, ssd, peer, peerFixed, rate);
    }
}
