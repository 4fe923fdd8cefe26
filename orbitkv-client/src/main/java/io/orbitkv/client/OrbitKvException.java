package io.orbitkv.client;

import io.orbitkv.state.protocol.ErrorCode;
import java.util.Objects;

/**
 * The Manager refused a request with an ERROR frame (or fenced the connection with one): the
 * {@link ErrorCode} says why, the message is the Manager's, for people.
 *
 * <p>Immutable. A refused request had no effect on the Manager (protocol.md section 7.1), so a
 * caller may retry after {@link ErrorCode#BUSY} or {@link ErrorCode#NO_SPACE}. Failures of the
 * transport itself (the socket closed, no reply within the client's timeout) are
 * {@link java.io.UncheckedIOException}s, not this type: they say nothing about the request.
 */
public final class OrbitKvException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    private final ErrorCode code;
    private final String detail;

    public OrbitKvException(ErrorCode code, String message) {
        super(Objects.requireNonNull(code, "code") + ": " + message);
        this.code = code;
        this.detail = Objects.requireNonNull(message, "message");
    }

    /** The same refusal, thrown again on the caller's thread (its stack trace is the caller's). */
    OrbitKvException rethrown() {
        OrbitKvException e = new OrbitKvException(code, detail);
        e.addSuppressed(this);
        return e;
    }

    /** The Manager's message, for people (may be empty). */
    public String detail() {
        return detail;
    }

    /** Why the Manager refused the request. */
    public ErrorCode code() {
        return code;
    }
}
