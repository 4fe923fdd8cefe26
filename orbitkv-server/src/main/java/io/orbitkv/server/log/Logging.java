package io.orbitkv.server.log;

import java.io.OutputStream;
import java.io.PrintStream;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogManager;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import java.util.logging.StreamHandler;

/**
 * The Manager's logging backend, configured once at start-up: java.util.logging with one handler
 * writing {@link OneLineFormatter} lines to stderr and one keeping {@link RecentErrors}.
 *
 * <p>Design note: JUL, because every logger in the process already ends there: core logs through
 * {@code System.Logger} (whose default backend is JUL), the server through JUL, gRPC through JUL,
 * and jetcd/Vert.x through SLF4J bound to JUL by {@code slf4j-jdk14}. A second backend (Logback,
 * Log4j) would add a dependency and a bridge per source and still need this configuration.
 * Configuring it in code rather than from a {@code logging.properties} file keeps one place
 * that the {@code --log-level} option sets, and needs no file next to the jar.
 *
 * <p>Libraries (gRPC, Netty, etcd's client, Vert.x, Micrometer) and the JDK's own loggers log at
 * WARN and above unless the level is TRACE: their INFO and DEBUG lines describe their internals, not the
 * Manager's state (at DEBUG the JDK would log a stack trace for the exit itself).
 */
public final class Logging {

    private static final String[] LIBRARIES = {"io.grpc", "io.netty", "io.etcd", "io.vertx", "io.micrometer", "com.google",
        "com.sun", "java", "javax", "jdk", "sun"};
    /** Strong references: JUL keeps loggers weakly, and a collected logger loses its level. */
    private static final Logger[] PINNED = new Logger[LIBRARIES.length + 1];
    private static final RecentErrors recent = new RecentErrors();

    private Logging() {
    }

    /**
     * Replaces the root logger's handlers with a one-line stderr handler at {@code level} and
     * the recent-errors handler; returns the latter. Later calls reconfigure (tests call it per
     * Manager in one JVM) and keep the same recent-errors handler.
     */
    public static synchronized RecentErrors configure(LogLevel level, PrintStream err) {
        Logger root = LogManager.getLogManager().getLogger("");
        for (Handler h : root.getHandlers()) root.removeHandler(h);
        Handler console = new FlushingHandler(err, new OneLineFormatter(level.compareTo(LogLevel.DEBUG) >= 0));
        console.setLevel(level.jul());
        root.addHandler(console);
        root.addHandler(recent);
        root.setLevel(level.jul());
        Logger orbitkv = Logger.getLogger("io.orbitkv");
        orbitkv.setLevel(level.jul());
        PINNED[0] = orbitkv;
        Level libraries = level == LogLevel.TRACE ? level.jul()
                : level.jul().intValue() > Level.WARNING.intValue() ? level.jul() : Level.WARNING;
        for (int i = 0; i < LIBRARIES.length; i++) {
            PINNED[i + 1] = Logger.getLogger(LIBRARIES[i]);
            PINNED[i + 1].setLevel(libraries);
        }
        return recent;
    }

    /** The recent-errors handler (empty until {@link #configure} ran). */
    public static synchronized RecentErrors recentErrors() {
        return recent;
    }

    /** A stream handler that flushes every record: a line must be on stderr before a crash. */
    private static final class FlushingHandler extends StreamHandler {
        FlushingHandler(OutputStream out, OneLineFormatter formatter) {
            super(out, formatter);
        }

        @Override
        public synchronized void publish(LogRecord record) {
            super.publish(record);
            flush();
        }

        @Override
        public synchronized void close() {
            flush();
        }
    }
}
