package io.orbitkv.core.engine;

import io.orbitkv.state.protocol.ErrorCode;

import java.util.Objects;

/**
 * Outcome of {@link ManagerCore#openSession}: a session for the new connection, or a refusal
 * (BUSY at {@code maxConnections}, SHUTTING_DOWN) that the transport sends as the ERROR answering
 * the connection's first frame before it closes the connection (protocol §8, {@code maxConnections}).
 */
public sealed interface OpenResult {

    /** The connection's session; the transport hands it every decoded request. */
    record Opened(ChannelSession session) implements OpenResult {
        public Opened {
            Objects.requireNonNull(session, "session");
        }
    }

    /** No session: answer the first frame with ERROR {@code code} and close. */
    record Refused(ErrorCode code, String message) implements OpenResult {
        public Refused {
            Objects.requireNonNull(code, "code");
            Objects.requireNonNull(message, "message");
        }
    }
}
