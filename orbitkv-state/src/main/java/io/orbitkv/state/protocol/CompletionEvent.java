package io.orbitkv.state.protocol;

/**
 * What an asynchronous COMPLETION frame reports.
 *
 * <p>Stable u8 wire codes (see {@code docs/protocol.md}); immutable.
 */
public enum CompletionEvent implements WireCode {

    /** The RESTORE of the operation finished: READY pages are fenced in the region. */
    RESTORE_DONE(1),

    /** A PENDING query became FINAL: QUERY_POLL returns the final result. */
    QUERY_SETTLED(2),

    /** After CANCELLED or RELEASED with drained = 0: the last submitted I/O finished and everything is released. */
    DRAINED(3);

    private final int code;

    CompletionEvent(int code) {
        this.code = code;
    }

    @Override
    public int code() {
        return code;
    }
}
