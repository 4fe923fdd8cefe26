package io.orbitkv.state.protocol;

/**
 * How a QUERY or PUBLISH_RESERVE names its pages.
 *
 * <p>Stable u8 wire codes (see {@code docs/protocol.md}); immutable.
 */
public enum KeyForm implements WireCode {

    /** The engine's chained block hash (1..64 bytes); the Manager derives the StateKey from the registered namespace. */
    BLOCK_HASH(1),

    /** A precomputed 32-byte {@link io.orbitkv.state.StateKey} of the registered namespace. */
    STATE_KEY(2);

    private final int code;

    KeyForm(int code) {
        this.code = code;
    }

    @Override
    public int code() {
        return code;
    }
}
