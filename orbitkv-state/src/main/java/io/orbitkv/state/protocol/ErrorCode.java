package io.orbitkv.state.protocol;

import java.util.Optional;

/**
 * Error codes carried by ERROR frames (u16) and by {@link DecodeResult.Malformed}. The numbers are
 * stable: a code is never renumbered or reused, and the table in {@code docs/protocol.md}
 * (checked by a test) is the normative list.
 *
 * <p>Immutable. {@link #closesConnection()} says whether the Manager closes the connection after
 * sending the ERROR: only when the byte stream can no longer be trusted, or the peer is not
 * speaking this protocol.
 */
public enum ErrorCode implements WireCode {

    /** The frame's body is not a valid encoding (truncated field, bad enum, trailing bytes, inconsistent values). */
    MALFORMED(1, false),
    /** The header's version is not one this side speaks. */
    UNSUPPORTED_VERSION(2, true),
    /** The frame, or a count inside it, exceeds a {@link ProtocolLimits} budget. */
    TOO_LARGE(3, false),
    /** The frame is not allowed in the connection's state (anything before REGISTER, a second REGISTER). */
    OUT_OF_ORDER(4, false),
    /** Unknown frame type, or a type that does not travel in this direction. */
    UNKNOWN_OPERATION(5, false),
    /** The instance registered again with a higher epoch; this incarnation is fenced. */
    STALE_EPOCH(6, true),
    /** The namespace or contract does not match what the request refers to (e.g. a group id the contract lacks, a page size mismatch). */
    NAMESPACE_MISMATCH(7, false),
    /** The query's demand inputs are invalid for the registered contract (origin past the prompt, not page-aligned). */
    INVALID_DEMAND(8, false),
    /** A bounded table (connections, operations, leases, reservations, regions) is full; retry later. */
    BUSY(9, false),
    /** The Manager cannot make room for the bytes the request needs. */
    NO_SPACE(10, false),
    /** The operation, region or reservation id is not live on this connection. */
    NOT_FOUND(11, false),
    /** A bug or environment failure inside the Manager; the request had no effect. */
    INTERNAL(12, false),
    /** A QUERY's revision is not higher than the live revision of that operation id. */
    STALE_REVISION(13, false),
    /** The Manager is draining for shutdown and accepts no new work. */
    SHUTTING_DOWN(14, true),
    /** The connection was not REGISTERED within the Manager's registration deadline. */
    REGISTER_TIMEOUT(15, true),
    /**
     * The descriptor socket refused a ticket or handle: unknown, expired, already used, or presented
     * by a process whose credentials differ from the registering connection's (protocol §6.11).
     */
    TICKET_REFUSED(16, false);

    private final int code;
    private final boolean closesConnection;

    ErrorCode(int code, boolean closesConnection) {
        this.code = code;
        this.closesConnection = closesConnection;
    }

    @Override
    public int code() {
        return code;
    }

    /** True if the Manager closes the connection after sending this error (non-skippable MALFORMED and TOO_LARGE close it too). */
    public boolean closesConnection() {
        return closesConnection;
    }

    /** The error with this code; empty for an unknown code. */
    public static Optional<ErrorCode> ofCode(int code) {
        return WireCode.lookup(ErrorCode.class, code);
    }
}
