package io.orbitkv.core.peer;

/**
 * How a page can be read into this Manager's host memory, in the order a plan tries them
 * (the seed's HostReadRoute): cheapest and least shared first. Local DRAM is a lease (no copy);
 * local SSD one device read (~0.2 ms per 2 MiB at 10 GB/s); a peer's DRAM one network copy
 * (~0.3 ms per 2 MiB over loopback gRPC); a peer's SSD both a device read at the peer and a copy.
 */
public enum ReadRoute {
    LOCAL_DRAM,
    LOCAL_SSD,
    PEER_DRAM,
    PEER_SSD;

    public boolean remote() {
        return switch (this) {
            case LOCAL_DRAM, LOCAL_SSD -> false;
            case PEER_DRAM, PEER_SSD -> true;
        };
    }
}
