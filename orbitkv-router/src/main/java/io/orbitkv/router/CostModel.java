package io.orbitkv.router;

/**
 * The constants that turn a {@link Coverage} into seconds: block size, the bandwidth of each read
 * route, the fixed cost of a peer read and the prefill rate assumed before a worker has reported
 * one. The router estimates with them; the simulator ({@code bin/bench-route}) also charges its
 * simulated workers with them, from this machine's measured figures.
 *
 * @param blockTokens                   tokens per block (the trace's 512, the engine's page size)
 * @param bytesPerBlock                 KV bytes of one block
 * @param dramBytesPerSecond            restore from the worker's own host DRAM into the engine
 * @param ssdBytesPerSecond             read from an SSD tier (local, or a peer's staged through its DRAM)
 * @param peerBytesPerSecond            payload between hosts (bulk data plane)
 * @param peerFixedSeconds              per request that reads from peers: catalog lookup and authorization
 * @param defaultPrefillTokensPerSecond a worker's prefill rate until it has reported measurements
 */
public record CostModel(int blockTokens, long bytesPerBlock, double dramBytesPerSecond, double ssdBytesPerSecond,
                        double peerBytesPerSecond, double peerFixedSeconds, double defaultPrefillTokensPerSecond) {

    public CostModel {
        if (blockTokens < 1) throw new IllegalArgumentException("blockTokens must be >= 1: " + blockTokens);
        if (bytesPerBlock < 1) throw new IllegalArgumentException("bytesPerBlock must be >= 1: " + bytesPerBlock);
        positive("dramBytesPerSecond", dramBytesPerSecond);
        positive("ssdBytesPerSecond", ssdBytesPerSecond);
        positive("peerBytesPerSecond", peerBytesPerSecond);
        positive("defaultPrefillTokensPerSecond", defaultPrefillTokensPerSecond);
        if (!(peerFixedSeconds >= 0) || Double.isInfinite(peerFixedSeconds)) {
            throw new IllegalArgumentException("peerFixedSeconds must be finite and >= 0: " + peerFixedSeconds);
        }
    }

    private static void positive(String name, double v) {
        if (!(v > 0) || Double.isInfinite(v)) throw new IllegalArgumentException(name + " must be finite and > 0: " + v);
    }

    /** Seconds to bring the covered prefix into the worker's engine (every route but recompute). */
    public double transferSeconds(Coverage c) {
        double b = bytesPerBlock;
        double s = c.localBlocks() * b / dramBytesPerSecond
                + c.localSsdBlocks() * b / ssdBytesPerSecond
                + c.peerDramBlocks() * b / peerBytesPerSecond
                + c.peerSsdBlocks() * (b / ssdBytesPerSecond + b / peerBytesPerSecond);
        return c.peerBlocks() > 0 ? s + peerFixedSeconds : s;
    }

    /**
     * Prompt tokens left to compute after a prefix of {@code prefixBlocks} whole blocks: at least
     * one, since an engine always computes the last prompt token to produce the first output.
     */
    public long recomputeTokens(long promptTokens, int prefixBlocks) {
        long hit = Math.min((long) prefixBlocks * blockTokens, promptTokens - 1);
        return promptTokens - hit;
    }
}
