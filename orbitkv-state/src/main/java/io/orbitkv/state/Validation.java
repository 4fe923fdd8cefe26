package io.orbitkv.state;

import java.util.Objects;

/**
 * The outcome of checking an input against a contract: accepted, or rejected with a reason.
 * A rejected input is never partly served.
 *
 * <p>Values; immutable and thread-safe. A value rather than an exception because a bad demand
 * from a peer is an expected outcome that the protocol boundary maps to an error code.
 */
public sealed interface Validation {

    /** Accepted. */
    static Validation ok() {
        return Ok.INSTANCE;
    }

    /** Rejected because of {@code reason}. */
    static Validation rejected(String reason) {
        return new Rejected(reason);
    }

    /** True for {@link Ok}. */
    default boolean isOk() {
        return this instanceof Ok;
    }

    /** The input satisfies the contract. */
    record Ok() implements Validation {
        static final Ok INSTANCE = new Ok();
    }

    /** The input does not satisfy the contract; {@code reason} says which rule it broke. */
    record Rejected(String reason) implements Validation {
        public Rejected {
            Objects.requireNonNull(reason, "reason");
        }
    }
}
