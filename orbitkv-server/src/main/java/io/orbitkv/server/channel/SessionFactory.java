package io.orbitkv.server.channel;

import io.orbitkv.core.engine.ChannelSession;
import io.orbitkv.core.engine.EventSink;

/**
 * Opens the Manager's side of a new connection ({@code ManagerCore::openSession}). Called on the
 * connection's own thread, once per accepted connection; must be thread-safe.
 */
@FunctionalInterface
public interface SessionFactory {

    /** A new session whose asynchronous events and fencing go to {@code sink}. */
    ChannelSession open(EventSink sink);
}
