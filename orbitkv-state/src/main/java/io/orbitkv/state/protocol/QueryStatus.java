package io.orbitkv.state.protocol;

/**
 * Whether a QUERY_RESULT is the operation's last word for its revision.
 *
 * <p>Stable u8 wire codes (see {@code docs/protocol.md}); immutable.
 */
public enum QueryStatus implements WireCode {

    /** Work (e.g. staging SSD pages into DRAM) is still running: poll again or wait for COMPLETION QUERY_SETTLED. */
    PENDING(1),

    /** The result will not change until RESTORE, RELEASE or CANCEL. */
    FINAL(2);

    private final int code;

    QueryStatus(int code) {
        this.code = code;
    }

    @Override
    public int code() {
        return code;
    }
}
