package io.orbitkv.state.protocol;

/**
 * Why PUBLISH_RESERVE refused one page (the page's RESERVED reply entry).
 *
 * <p>Stable u8 wire codes (see {@code docs/protocol.md}); immutable.
 */
public enum Refusal implements WireCode {

    /** The key is already resident or being published: nothing to write. */
    ALREADY_RESIDENT(2),

    /** No slot of the needed size class can be freed now. */
    NO_SPACE(3),

    /** The connection's reservation table is full. */
    BUSY(4);

    private final int code;

    Refusal(int code) {
        this.code = code;
    }

    @Override
    public int code() {
        return code;
    }
}
