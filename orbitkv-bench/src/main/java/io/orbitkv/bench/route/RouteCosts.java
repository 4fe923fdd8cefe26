package io.orbitkv.bench.route;

import io.orbitkv.router.CostModel;
import io.orbitkv.router.MeasuredCosts;

/**
 * Every constant of the routing simulator's prefill and transfer models; {@link #MEASURED} takes
 * them from {@link MeasuredCosts} (this machine's figures, each with its source) and the trace's
 * 512-token blocks. {@code bin/bench-route} overrides each by a flag.
 *
 * @param blockTokens            tokens per trace block (the Mooncake trace's 512)
 * @param kvBytesPerToken        KV bytes per token
 * @param prefillTokensPerSecond a worker's prefill rate
 * @param dramBytesPerSecond     restore from the worker's own host DRAM
 * @param ssdBytesPerSecond      SSD tier read
 * @param peerBytesPerSecond     payload between hosts
 * @param peerFixedSeconds       per request that reads from peers
 */
public record RouteCosts(int blockTokens, long kvBytesPerToken, double prefillTokensPerSecond, double dramBytesPerSecond,
                         double ssdBytesPerSecond, double peerBytesPerSecond, double peerFixedSeconds) {

    public static final RouteCosts MEASURED = new RouteCosts(512, MeasuredCosts.KV_BYTES_PER_TOKEN,
            MeasuredCosts.PREFILL_TOKENS_PER_SECOND, MeasuredCosts.DRAM_BYTES_PER_SECOND, MeasuredCosts.SSD_BYTES_PER_SECOND,
            MeasuredCosts.PEER_BYTES_PER_SECOND, MeasuredCosts.PEER_FIXED_SECONDS);

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
