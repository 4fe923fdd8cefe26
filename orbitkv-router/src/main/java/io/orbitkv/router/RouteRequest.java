package io.orbitkv.router;

/**
 * What a request brings to the router: its prompt's block chain (as {@link BlockKeys}, first
 * block first; may be empty when the caller has no hashes: every worker then misses) and its
 * prompt length in tokens.
 */
public record RouteRequest(long[] blockKeys, long promptTokens) {

    public RouteRequest {
        blockKeys = blockKeys.clone();
        if (promptTokens < 1) throw new IllegalArgumentException("promptTokens must be >= 1: " + promptTokens);
    }

    public int blocks() {
        return blockKeys.length;
    }
}
