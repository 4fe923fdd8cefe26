package io.orbitkv.state;

import java.util.Objects;

/**
 * The outcome of {@link Namespace#decode(byte[])}: a namespace, or why the bytes are not one.
 *
 * <p>Values; immutable and thread-safe. Malformed input from a REGISTER frame is an expected
 * outcome, so it is a value the protocol boundary maps to an error code, not an exception.
 */
public sealed interface NamespaceDecoding {

    /** The bytes were a canonical namespace encoding. */
    record Decoded(Namespace namespace) implements NamespaceDecoding {
        public Decoded {
            Objects.requireNonNull(namespace, "namespace");
        }
    }

    /** The bytes were not; {@code reason} names the offset and the problem. */
    record Malformed(String reason) implements NamespaceDecoding {
        public Malformed {
            Objects.requireNonNull(reason, "reason");
        }
    }
}
