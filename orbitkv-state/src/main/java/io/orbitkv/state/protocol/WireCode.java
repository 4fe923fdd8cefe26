package io.orbitkv.state.protocol;

import java.util.Optional;

/**
 * An enum constant with a stable numeric code on the wire. Codes are never reused or renumbered;
 * the doc-consistency test ties each code to {@code docs/protocol.md}.
 */
interface WireCode {

    /**
     * Each enum's constants, fetched once: {@link Class#getEnumConstants()} clones its array on
     * every call, which would be one allocation per page entry of a 65,536-page QUERY_RESULT.
     */
    ClassValue<Object[]> CONSTANTS = new ClassValue<>() {
        @Override
        protected Object[] computeValue(Class<?> type) {
            return type.getEnumConstants();
        }
    };

    /** The code this constant travels as. */
    int code();

    /** The constant of {@code type} whose code is {@code code}; empty for an unknown code. */
    static <E extends Enum<E> & WireCode> Optional<E> lookup(Class<E> type, int code) {
        for (Object o : CONSTANTS.get(type)) {
            E e = type.cast(o);
            if (e.code() == code) return Optional.of(e);
        }
        return Optional.empty();
    }
}
