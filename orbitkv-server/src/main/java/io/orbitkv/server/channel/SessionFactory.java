package io.orbitkv.server.channel;

import io.orbitkv.core.engine.EventSink;
import io.orbitkv.core.engine.OpenResult;
import java.nio.file.attribute.UserPrincipal;
import java.util.Optional;

/**
 * Opens the Manager's side of a new connection ({@code ManagerCore::openSession}). Called on the
 * connection's own thread, once per accepted connection; must be thread-safe.
 */
@FunctionalInterface
public interface SessionFactory {

    /**
     * A new session whose asynchronous events and fencing go to {@code sink}, or a refusal (BUSY,
     * SHUTTING_DOWN) that answers the connection's first frame before the connection closes.
     * {@code client} is the connecting process's user from {@code SO_PEERCRED}, empty when the
     * socket could not report it.
     */
    OpenResult open(EventSink sink, Optional<UserPrincipal> client);
}
