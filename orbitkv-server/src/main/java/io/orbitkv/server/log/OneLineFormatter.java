package io.orbitkv.server.log;

import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.logging.Formatter;
import java.util.logging.LogRecord;

/**
 * One line per event: {@code 2026-12-01T19:21:17.123Z WARN  storage.ssd: message}. UTC time to
 * the millisecond, the level padded to 5, the component, the message; a thrown exception is
 * appended to the same line as {@code | Type: message (at frame)}, its stack trace on the
 * following lines only when {@code withStackTraces} (DEBUG and TRACE), so that at INFO every event
 * is exactly one line a log shipper or {@code grep} can take as a record.
 *
 * <p>The component is the owner of the code that logged, taken from the logger name:
 * {@code io.orbitkv.core.storage.ssd.SsdStore} → {@code storage.ssd}, {@code
 * io.orbitkv.server.daemon.ManagerDaemon} → {@code daemon}; a library's logger keeps its first
 * two name segments ({@code io.grpc}, {@code io.netty}). Line breaks inside a message are
 * replaced by {@code " | "}, so no message can forge a second record.
 *
 * <p>Stateless and thread-safe.
 */
public final class OneLineFormatter extends Formatter {

    private static final DateTimeFormatter TIME = DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")
            .withZone(ZoneOffset.UTC);

    private final boolean withStackTraces;

    public OneLineFormatter(boolean withStackTraces) {
        this.withStackTraces = withStackTraces;
    }

    @Override
    public String format(LogRecord record) {
        StringBuilder b = new StringBuilder(160);
        b.append(TIME.format(Instant.ofEpochMilli(record.getMillis()))).append(' ');
        String level = LogLevel.label(record.getLevel());
        b.append(level).append(" ".repeat(6 - level.length()));
        b.append(component(record.getLoggerName())).append(": ");
        b.append(oneLine(formatMessage(record)));
        Throwable t = record.getThrown();
        if (t != null) {
            b.append(" | ").append(oneLine(String.valueOf(t)));
            StackTraceElement[] frames = t.getStackTrace();
            if (frames.length > 0) b.append(" (at ").append(frames[0]).append(')');
        }
        b.append(System.lineSeparator());
        if (t != null && withStackTraces) {
            java.io.StringWriter w = new java.io.StringWriter();
            t.printStackTrace(new java.io.PrintWriter(w));
            b.append(w);
        }
        return b.toString();
    }

    /** The component of logger {@code name} (see the class comment); {@code -} when there is none. */
    public static String component(String name) {
        if (name == null || name.isEmpty()) return "-";
        String[] parts = name.split("\\.");
        if (name.startsWith("io.orbitkv.") && parts.length >= 4) {
            // io.orbitkv.<module>.<package...>.<Class>: the packages below the module
            int last = Character.isUpperCase(parts[parts.length - 1].charAt(0)) ? parts.length - 1 : parts.length;
            if (last <= 3) return parts[2];
            return String.join(".", java.util.Arrays.copyOfRange(parts, 3, last));
        }
        return parts.length <= 2 ? name : parts[0] + "." + parts[1];
    }

    private static String oneLine(String s) {
        if (s == null) return "";
        return s.indexOf('\n') < 0 && s.indexOf('\r') < 0 ? s : s.replace("\r\n", " | ").replace('\r', ' ').replace("\n", " | ");
    }
}
