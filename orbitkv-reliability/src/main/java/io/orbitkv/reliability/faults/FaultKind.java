package io.orbitkv.reliability.faults;

import java.util.Locale;

/** The faults a schedule injects: SSD device faults (through {@link FaultyDevice}) and client behaviour (the driver). */
public enum FaultKind {
    /** A read answered with an I/O error. */
    READ_ERROR,
    /** A write answered with an I/O error. */
    WRITE_ERROR,
    /** A read or write delayed by 20-500 µs. */
    DELAY,
    /** A read that returns fewer payload (or header) bytes than the extent has. */
    SHORT_READ,
    /** A write that stores the header and only a prefix of the payload, and reports success. */
    TORN_WRITE,
    /** A read whose bytes come back with one byte flipped (payload or header). */
    CORRUPTION,
    /** A write refused with ENOSPC. */
    ENOSPC,
    /** The client's connection dies between two of its steps (reservations, queries, leases held). */
    SESSION_DEATH,
    /** CANCEL of a query (pending or settled). */
    CANCEL,
    /** The instance registers again with a higher epoch on a new connection, fencing the old one. */
    EPOCH_BUMP,
    /** The Manager core and its tiers restart over the same SSD directory. */
    RESTART;

    String label() {
        return name().toLowerCase(Locale.ROOT);
    }
}
