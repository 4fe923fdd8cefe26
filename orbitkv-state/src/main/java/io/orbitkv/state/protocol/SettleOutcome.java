package io.orbitkv.state.protocol;

/**
 * The outcome for one reservation id in a COMMITTED or ABORTED reply.
 *
 * <p>Stable u8 wire codes (see {@code docs/protocol.md}); immutable.
 */
public enum SettleOutcome implements WireCode {

    /** PUBLISH_COMMIT: the page is sealed and becomes resident. */
    SEALED(1),

    /** PUBLISH_ABORT: the slot is freed; the bytes are discarded. */
    ABORTED(2),

    /** No live reservation of this connection has that id. */
    NOT_FOUND(3),

    /** PUBLISH_COMMIT: another publisher sealed the same key first; this copy is discarded and its slot freed. */
    DISCARDED(4);

    private final int code;

    SettleOutcome(int code) {
        this.code = code;
    }

    @Override
    public int code() {
        return code;
    }
}
