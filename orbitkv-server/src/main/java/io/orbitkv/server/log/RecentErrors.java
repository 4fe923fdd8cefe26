package io.orbitkv.server.log;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;

/**
 * The last {@value #CAPACITY} WARN and ERROR events, for the status page and {@code /status}
 * ({@code recentErrors}): what an operator looking at a misbehaving Manager wants first, without
 * access to its stderr. A JUL handler on the root logger; the oldest event is dropped when full.
 *
 * <p>Thread-safe: {@link #publish} and {@link #snapshot} are synchronized (WARN events are rare
 * and rate-limited by their callers, so the lock is never contended on a hot path).
 */
public final class RecentErrors extends Handler {

    /** Events kept: a screenful on the status page. */
    public static final int CAPACITY = 32;

    /** One event: epoch milliseconds, ERROR or WARN, the component and the one-line message. */
    public record Event(long timeMillis, String level, String component, String message) {
    }

    // @GuardedBy("this")
    private final ArrayDeque<Event> events = new ArrayDeque<>(CAPACITY);
    // @GuardedBy("this")
    private long total;

    public RecentErrors() {
        setLevel(Level.WARNING);
    }

    @Override
    public synchronized void publish(LogRecord record) {
        if (record == null || record.getLevel().intValue() < Level.WARNING.intValue()) return;
        String message = new OneLineFormatter(false).formatMessage(record);
        if (record.getThrown() != null) message += " | " + record.getThrown();
        if (message.length() > 1_000) message = message.substring(0, 1_000) + "...";
        if (events.size() == CAPACITY) events.removeFirst();
        events.addLast(new Event(record.getMillis(), LogLevel.label(record.getLevel()),
                OneLineFormatter.component(record.getLoggerName()), message.replace('\n', ' ')));
        total++;
    }

    /** The events kept, oldest first. */
    public synchronized List<Event> snapshot() {
        return new ArrayList<>(events);
    }

    /** WARN and ERROR events since start, including those no longer kept. */
    public synchronized long total() {
        return total;
    }

    @Override
    public void flush() {
    }

    @Override
    public void close() {
    }
}
