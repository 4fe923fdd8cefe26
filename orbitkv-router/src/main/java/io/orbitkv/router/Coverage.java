package io.orbitkv.router;

/**
 * How one worker would obtain a request's prefix, block by block along the chain: blocks its own
 * host holds (engine HBM or Manager DRAM; its SSD), blocks it would read from a peer host
 * (peer DRAM; peer SSD only), up to the first block that no trusted holder has. Everything after
 * that is recomputed.
 *
 * @param localBlocks       held in the worker's HBM or its host's DRAM
 * @param localSsdBlocks    held only on the worker's host SSD
 * @param peerDramBlocks    held by no local tier, in another host's DRAM
 * @param peerSsdBlocks     held by no local tier and no peer DRAM, on another host's SSD
 * @param localPrefixBlocks the leading blocks held in a local tier (any), before the first that is
 *                          not: what a "longest cached prefix" scorer sees
 */
public record Coverage(int localBlocks, int localSsdBlocks, int peerDramBlocks, int peerSsdBlocks, int localPrefixBlocks) {

    public static final Coverage NONE = new Coverage(0, 0, 0, 0, 0);

    public Coverage {
        if (localBlocks < 0 || localSsdBlocks < 0 || peerDramBlocks < 0 || peerSsdBlocks < 0 || localPrefixBlocks < 0) {
            throw new IllegalArgumentException("negative block count");
        }
        if (localPrefixBlocks > localBlocks + localSsdBlocks) {
            throw new IllegalArgumentException("local prefix " + localPrefixBlocks + " longer than the local blocks");
        }
    }

    /** Blocks of the prefix obtainable without recomputation. */
    public int prefixBlocks() {
        return localBlocks + localSsdBlocks + peerDramBlocks + peerSsdBlocks;
    }

    /** Blocks read from another host. */
    public int peerBlocks() {
        return peerDramBlocks + peerSsdBlocks;
    }
}
