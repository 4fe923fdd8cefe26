package io.orbitkv.core.engine;

import io.orbitkv.state.protocol.DescriptorTicket;
import java.nio.file.attribute.UserPrincipal;
import java.util.Optional;
import java.util.OptionalInt;

/**
 * How descriptors cross between the Manager and its clients (protocol §6.11): a session offers
 * its namespace's arena descriptors under a one-time ticket that REGISTERED carries, and claims a
 * region descriptor that its client handed over under a handle. The transport implements it (the
 * server's descriptor socket, which owns the sockets this module must not open);
 * {@link InProcessHandoff} serves clients in the Manager's own JVM (tests, the fault simulator).
 *
 * <p>Thread-safe; called on session threads. Every table behind it is bounded and every entry it
 * holds ends when redeemed, expired, or when its owner session is {@link #release released}.
 */
public interface DescriptorHandoff {

    /** The absolute path REGISTERED names as the descriptor socket. */
    String socketPath();

    /**
     * Offers {@code fds} (borrowed: the handoff duplicates what it keeps) to one process with
     * {@code client}'s credentials, on behalf of session {@code owner}; the ticket, or empty when
     * the ticket table is full.
     */
    Optional<DescriptorTicket> offerArenas(Object owner, int[] fds, Optional<UserPrincipal> client);

    /**
     * The region descriptor a process with {@code client}'s credentials handed over under
     * {@code handle}, now owned by the caller (who closes it); empty when the handle is unknown,
     * expired, already claimed, or was handed over by other credentials.
     */
    OptionalInt claimRegion(DescriptorTicket handle, Optional<UserPrincipal> client);

    /** Session {@code owner} ended: its unredeemed offers are dropped. */
    void release(Object owner);
}
