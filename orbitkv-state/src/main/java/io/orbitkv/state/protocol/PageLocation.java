package io.orbitkv.state.protocol;

/**
 * Where CONTAINED says a named page of the connection's namespace is held on this Manager now
 * (protocol §6.14). A location is an index read, not a lease: the page may be gone by the next
 * request, and only a QUERY's lease makes its bytes readable.
 *
 * <p>Stable u8 wire codes (see {@code docs/protocol.md}); immutable.
 */
public enum PageLocation implements WireCode {

    /** Neither tier of this Manager holds the page in the namespace (nor a reservation not yet committed). */
    ABSENT(0),

    /** Resident in DRAM: a QUERY would lease it with no I/O. */
    DRAM(1),

    /** On the local SSD only: a QUERY would stage it into DRAM first. */
    SSD(2);

    private final int code;

    PageLocation(int code) {
        this.code = code;
    }

    @Override
    public int code() {
        return code;
    }
}
