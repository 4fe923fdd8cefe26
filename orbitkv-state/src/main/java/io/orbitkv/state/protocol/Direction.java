package io.orbitkv.state.protocol;

/** Which way a frame type travels; a frame decoded in the wrong direction is UNKNOWN_OPERATION. */
public enum Direction {
    /** Requests, sent by a client (engine) to the Manager. */
    TO_MANAGER,
    /** Replies and asynchronous events, sent by the Manager to a client. */
    TO_CLIENT
}
