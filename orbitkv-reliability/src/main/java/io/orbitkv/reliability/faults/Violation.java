package io.orbitkv.reliability.faults;

/**
 * A failed check of a {@link Schedule}: the message says what and where; the campaign adds the
 * seed. Stackless: the step and the trail of the last actions locate it, not a stack.
 */
final class Violation extends RuntimeException {
    private static final long serialVersionUID = 1L;

    Violation(String message) {
        super(message, null, false, false);
    }
}
