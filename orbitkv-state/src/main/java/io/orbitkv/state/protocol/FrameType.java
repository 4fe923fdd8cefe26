package io.orbitkv.state.protocol;

import java.util.Optional;

/**
 * The frame types (u16 {@code type} of the header). A reply's code is its request's code with
 * bit 15 set; COMPLETION and ERROR are the two frames that are not a typed reply. Codes are
 * stable; {@code docs/protocol.md}'s table is normative and a test ties it to this enum.
 *
 * <p>Immutable.
 */
public enum FrameType implements WireCode {

    REGISTER(0x0001, Direction.TO_MANAGER),
    REGISTER_REGION(0x0002, Direction.TO_MANAGER),
    QUERY(0x0003, Direction.TO_MANAGER),
    QUERY_POLL(0x0004, Direction.TO_MANAGER),
    CANCEL(0x0005, Direction.TO_MANAGER),
    PUBLISH_RESERVE(0x0006, Direction.TO_MANAGER),
    PUBLISH_COMMIT(0x0007, Direction.TO_MANAGER),
    PUBLISH_ABORT(0x0008, Direction.TO_MANAGER),
    RESTORE(0x0009, Direction.TO_MANAGER),
    RELEASE(0x000A, Direction.TO_MANAGER),
    STATS(0x000B, Direction.TO_MANAGER),
    PREPARE(0x000C, Direction.TO_MANAGER),
    HINT(0x000D, Direction.TO_MANAGER),
    CONTAINS(0x000E, Direction.TO_MANAGER),

    REGISTERED(0x8001, Direction.TO_CLIENT),
    REGION_REGISTERED(0x8002, Direction.TO_CLIENT),
    /** The reply to both QUERY and QUERY_POLL. */
    QUERY_RESULT(0x8003, Direction.TO_CLIENT),
    CANCELLED(0x8005, Direction.TO_CLIENT),
    RESERVED(0x8006, Direction.TO_CLIENT),
    COMMITTED(0x8007, Direction.TO_CLIENT),
    ABORTED(0x8008, Direction.TO_CLIENT),
    RESTORE_ACCEPTED(0x8009, Direction.TO_CLIENT),
    RELEASED(0x800A, Direction.TO_CLIENT),
    STATS_REPLY(0x800B, Direction.TO_CLIENT),
    /** The reply to PREPARE: accepted, trimmed or refused; never a hit. */
    PREPARED(0x800C, Direction.TO_CLIENT),
    HINTED(0x800D, Direction.TO_CLIENT),
    /** The reply to CONTAINS: one location per page named; never a lease. */
    CONTAINED(0x800E, Direction.TO_CLIENT),
    /** Asynchronous event; request id 0. */
    COMPLETION(0x80F0, Direction.TO_CLIENT),
    /** The reply to any request that failed; request id of that request, or 0 if unknown. */
    ERROR(0x80FF, Direction.TO_CLIENT);

    private final int code;
    private final Direction direction;

    FrameType(int code, Direction direction) {
        this.code = code;
        this.direction = direction;
    }

    @Override
    public int code() {
        return code;
    }

    /** Which way frames of this type travel. */
    public Direction direction() {
        return direction;
    }

    /** The type with this code; empty for an unknown code. */
    public static Optional<FrameType> ofCode(int code) {
        return WireCode.lookup(FrameType.class, code);
    }
}
