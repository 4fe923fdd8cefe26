package io.orbitkv.state.protocol;

/**
 * Where a QUERY's hit must end up before the operation counts as complete.
 *
 * <p>Stable u8 wire codes (see {@code docs/protocol.md}); immutable.
 */
public enum CompletionTarget implements WireCode {

    /** Leased pages in the Manager's shared arena, readable by the client. */
    HOST_READY(1),

    /** Pages copied by the Manager into a region the engine registered (RESTORE). */
    ENGINE_RESTORE(2);

    private final int code;

    CompletionTarget(int code) {
        this.code = code;
    }

    @Override
    public int code() {
        return code;
    }
}
