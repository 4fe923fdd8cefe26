package io.orbitkv.server.log;

import java.util.Locale;
import java.util.logging.Level;

/**
 * The levels an operator chooses with {@code --log-level}, and the JUL levels behind them. The
 * Manager's own code logs through {@code System.Logger} (core) and JUL or SLF4J (server, libraries),
 * all of which end in JUL; {@code System.Logger.Level.DEBUG} is JUL's {@code FINE} and
 * {@code TRACE} is {@code FINER}.
 */
public enum LogLevel {
    ERROR(Level.SEVERE),
    WARN(Level.WARNING),
    INFO(Level.INFO),
    DEBUG(Level.FINE),
    TRACE(Level.FINEST);

    private final Level jul;

    LogLevel(Level jul) {
        this.jul = jul;
    }

    /** The JUL threshold: records below it are not written. */
    public Level jul() {
        return jul;
    }

    /**
     * {@code error}, {@code warn}, {@code info}, {@code debug} or {@code trace}, in any case.
     *
     * @throws IllegalArgumentException naming the accepted words
     */
    public static LogLevel parse(String word) {
        try {
            return valueOf(word.strip().toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("log level '" + word + "' is not one of error, warn, info, debug, trace");
        }
    }

    /** How a JUL level is printed: ERROR, WARN, INFO, DEBUG or TRACE. */
    public static String label(Level level) {
        int v = level.intValue();
        if (v >= Level.SEVERE.intValue()) return "ERROR";
        if (v >= Level.WARNING.intValue()) return "WARN";
        if (v >= Level.INFO.intValue()) return "INFO";
        if (v >= Level.FINE.intValue()) return "DEBUG";
        return "TRACE";
    }
}
