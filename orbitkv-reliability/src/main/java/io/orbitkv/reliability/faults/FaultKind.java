package io.orbitkv.reliability.faults;

import java.util.Locale;

/**
 * The faults a schedule injects: SSD device faults (through {@link FaultyDevice}), peer transport
 * faults (through {@link FaultyTransport}) and client and peer behaviour (the driver).
 */
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
    RESTART,
    /** A peer call (authorize, transfer or release) never answers: the request or its reply is lost. */
    PEER_DROP,
    /** A peer call answers 0.2-3 ms late. */
    PEER_DELAY,
    /** A transfer stream fails after part of the payload arrived. */
    PEER_RESET,
    /** One bit of a transferred payload chunk is flipped on the way (the source's CRC32C trailer is intact). */
    PEER_CORRUPTION,
    /** The peer Manager dies in the middle of a transfer and starts again (new incarnation, same SSD files). */
    PEER_RESTART,
    /** The peer evicts from DRAM pages the catalog still names, right before a query reads them remotely. */
    STALE_CATALOG,
    /** The engine truncates its registered region file before a RESTORE into it. */
    REGION_TRUNCATE,
    /** The engine's connection dies while its RESTORE copies are in flight. */
    RESTORE_DEATH;

    String label() {
        return name().toLowerCase(Locale.ROOT);
    }
}
