package io.orbitkv.core.engine;

import io.orbitkv.state.protocol.DescriptorTicket;
import java.nio.file.attribute.UserPrincipal;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;

/**
 * The {@link DescriptorHandoff} of a Manager without a descriptor socket: a client in the same JVM
 * (tests, the fault simulator) redeems its ticket with {@link #redeem} and gets the tier's own
 * descriptors, borrowed (valid while the Manager is open; it maps them through
 * {@code /proc/self/fd/N} and never closes them). Regions come from paths only here.
 *
 * <p>Thread-safe (one lock). At most one offer per live session: an offer is dropped when
 * redeemed or when its session is released, so the table holds at most {@code maxConnections}.
 */
public final class InProcessHandoff implements DescriptorHandoff {

    /** What REGISTERED names as the socket when there is none. */
    public static final String NO_SOCKET = "/in-process";

    private record Offer(Object owner, int[] fds) {
    }

    /** Guarded by {@code this}. */
    private final Map<DescriptorTicket, Offer> offers = new HashMap<>();

    /** Made only by {@link ManagerCore}, one per Manager; others reach it through its handoff. */
    InProcessHandoff() {
    }

    @Override
    public String socketPath() {
        return NO_SOCKET;
    }

    @Override
    public synchronized Optional<DescriptorTicket> offerArenas(Object owner, int[] fds, Optional<UserPrincipal> client) {
        DescriptorTicket ticket = DescriptorTicket.random();
        offers.put(ticket, new Offer(owner, fds.clone()));
        return Optional.of(ticket);
    }

    /** The descriptors offered under {@code ticket}, once; empty for an unknown or used ticket. */
    public synchronized Optional<int[]> redeem(DescriptorTicket ticket) {
        Offer offer = offers.remove(ticket);
        return offer == null ? Optional.empty() : Optional.of(offer.fds().clone());
    }

    @Override
    public OptionalInt claimRegion(DescriptorTicket handle, Optional<UserPrincipal> client) {
        return OptionalInt.empty();
    }

    @Override
    public synchronized void release(Object owner) {
        offers.values().removeIf(o -> o.owner() == owner);
    }

    /** Offers not yet redeemed. */
    public synchronized int size() {
        return offers.size();
    }
}
