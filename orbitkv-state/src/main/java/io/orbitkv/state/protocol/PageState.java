package io.orbitkv.state.protocol;

/**
 * One page's state in a QUERY_RESULT.
 *
 * <p>Stable u8 wire codes (see {@code docs/protocol.md}); immutable.
 */
public enum PageState implements WireCode {

    /** No replica known. */
    MISS(0),

    /** A replica is known (metadata only); this is not a read grant. */
    CANDIDATE(1),

    /** The source replica is leased and being staged; not yet readable. */
    RESERVED(2),

    /** In Manager DRAM and leased to this operation; the entry carries the lease. */
    RESIDENT(3),

    /** Copied into the engine's destination region and fenced (ENGINE_RESTORE). */
    READY(4);

    private final int code;

    PageState(int code) {
        this.code = code;
    }

    @Override
    public int code() {
        return code;
    }
}
