package io.orbitkv.server.cli;

/**
 * Bad user input to a CLI command (malformed JSON, a missing field, a misaligned value). The
 * CLI's one error boundary ({@link OrbitKvCli#run}) prints it as one line,
 * {@code orbitkv: error: <message>}, and exits with status 2; nothing else catches it.
 *
 * <p>Public (its constructor is not) so that fuzzing and conformance tools calling
 * {@link StateJson}'s readers can tell this documented refusal from a bug.
 */
public final class InputException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    InputException(String message) {
        super(message, null, false, false);
    }
}
