package io.orbitkv.state.protocol;

import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.function.ToIntFunction;

/**
 * Argument checks shared by the frame records' compact constructors. Each throws
 * {@link IllegalArgumentException} naming the field, which {@link FrameDecoder} turns into a
 * MALFORMED result. Stateless.
 */
final class Check {

    /** Largest value of a u16 field. */
    static final int U16_MAX = 0xFFFF;

    private Check() {
    }

    static void nonNegative(String field, long value) {
        if (value < 0) throw new IllegalArgumentException(field + " must be >= 0: " + value);
    }

    static void positive(String field, long value) {
        if (value <= 0) throw new IllegalArgumentException(field + " must be > 0: " + value);
    }

    static void atMost(String field, long value, long max) {
        if (value > max) throw new IllegalArgumentException(field + " must be <= " + max + ": " + value);
    }

    /** The UTF-8 length of {@code value}, refusing lone surrogates (they have no encoding). */
    static int utf8Length(String field, String value) {
        Objects.requireNonNull(value, field);
        try {
            return StandardCharsets.UTF_8.newEncoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .encode(CharBuffer.wrap(value)).remaining();
        } catch (CharacterCodingException e) {
            throw new IllegalArgumentException(field + " is not well-formed Unicode", e);
        }
    }

    /** Checks {@code value} is well-formed text of {@code minBytes..maxBytes} UTF-8 bytes. */
    static void text(String field, String value, int minBytes, int maxBytes) {
        int n = utf8Length(field, value);
        if (n < minBytes || n > maxBytes) {
            throw new IllegalArgumentException(field + " must be " + minBytes + ".." + maxBytes + " UTF-8 bytes: " + n);
        }
    }

    /** A null-free immutable copy holding at most {@code max} elements. */
    static <T> List<T> list(String field, List<T> values, int min, int max) {
        List<T> copy = List.copyOf(Objects.requireNonNull(values, field));
        if (copy.size() < min || copy.size() > max) {
            throw new IllegalArgumentException(field + " must have " + min + ".." + max + " entries: " + copy.size());
        }
        return copy;
    }

    /** Refuses two elements with the same id. */
    static <T> void uniqueIds(String field, List<T> values, ToIntFunction<T> id) {
        Set<Integer> seen = new HashSet<>();
        for (T v : values) {
            if (!seen.add(id.applyAsInt(v))) {
                throw new IllegalArgumentException(field + " repeats id " + id.applyAsInt(v));
            }
        }
    }
}
