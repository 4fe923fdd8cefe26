package io.orbitkv.state;

import java.util.Objects;

/** The outcome of {@link Namespace#decode(byte[])}: a namespace, or why the bytes are not one. */
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
