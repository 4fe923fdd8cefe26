package io.orbitkv.state.protocol;

import java.util.Optional;

/**
 * An enum constant with a stable numeric code on the wire. Codes are never reused or renumbered;
 * the doc-consistency test ties each code to {@code docs/protocol.md}.
 */
interface WireCode {

    /** The code this constant travels as. */
    int code();

    /** The constant of {@code type} whose code is {@code code}; empty for an unknown code. */
    static <E extends Enum<E> & WireCode> Optional<E> lookup(Class<E> type, int code) {
        for (E e : type.getEnumConstants()) {
            if (e.code() == code) return Optional.of(e);
        }
        return Optional.empty();
    }
}
