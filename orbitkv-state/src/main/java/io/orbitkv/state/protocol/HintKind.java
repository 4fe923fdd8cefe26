package io.orbitkv.state.protocol;

/**
 * What a HINT asks of the Manager for the pages it names (protocol §5.12).
 *
 * <p>Stable u8 wire codes (see {@code docs/protocol.md}); immutable.
 */
public enum HintKind implements WireCode {

    /** Keep the pages resident in DRAM for {@code duration_millis}, within the namespace's pinned-byte budget. */
    PIN(1),

    /** End the pins of the pages now. */
    UNPIN(2),

    /** The pages are worth more than their recency says: the eviction policy keeps them longer. */
    RETAIN(3),

    /** The pages are worth less than their recency says: the eviction policy takes them first. */
    DEMOTE(4),

    /** Remove the pages from DRAM and SSD now (leased images leave once their leases end). */
    DROP(5);

    private final int code;

    HintKind(int code) {
        this.code = code;
    }

    @Override
    public int code() {
        return code;
    }
}
