package io.orbitkv.core.peer;

/** Where the source holds the page a requester asks for, as the catalog reported it. */
public enum PeerMedium {
    /** In the source's DRAM tier; the generation is the DRAM image id. */
    DRAM,
    /** On the source's SSD; the generation is the extent generation. The source stages it into its DRAM first. */
    SSD
}
