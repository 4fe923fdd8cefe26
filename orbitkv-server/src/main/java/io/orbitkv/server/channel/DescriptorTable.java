package io.orbitkv.server.channel;

import io.orbitkv.state.protocol.DescriptorTicket;
import java.nio.file.attribute.UserPrincipal;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.function.IntConsumer;

/**
 * The descriptor socket's two bounded tables (protocol §6.11): arena offers, each under the
 * one-time ticket a REGISTERED carried, and parked region descriptors, each under the handle the
 * descriptor socket gave back. Each entry owns its descriptors (duplicates) until it is redeemed
 * (they pass to the caller), expires, or its session is released (they are closed through
 * {@code closer}).
 *
 * <p>Thread model: every method takes the table's monitor; nothing calls out while holding it
 * except {@code closer} (a {@code close(2)}). Time comes in as a parameter.
 *
 * <p>Invariants: at most {@code maxOffers} offers and {@code maxRegions} parked regions; an entry
 * is redeemed at most once, and only by a process of the user it was bound to; an entry is
 * redeemed only by a request that arrived before it expired (the arrival time is the caller's:
 * when the descriptor connection was accepted), so time a request spent being read is not taken
 * from its ticket; an expired entry is dropped by the first call that looks at the table
 * {@code lateArrivalNanos} past its expiry (the longest a request is read before it is judged). A
 * presentation with other credentials burns the entry: the rightful client then fails loudly
 * instead of a leaked ticket staying usable.
 */
final class DescriptorTable {

    /**
     * Who may redeem an entry: the user as the kernel reports it ({@code SO_PEERCRED}) on the
     * channel connection and on the descriptor connection; principals compare by uid.
     */
    record Credentials(UserPrincipal user) {
        Credentials {
            Objects.requireNonNull(user, "user");
        }
    }

    /** Why a redemption failed; all reach the client as ERROR TICKET_REFUSED. */
    enum Refusal { UNKNOWN, EXPIRED, WRONG_PEER }

    /** The outcome of a redemption. */
    sealed interface Redeemed {
        /** The entry's descriptors, now the caller's. */
        record Granted(int[] fds) implements Redeemed {
        }

        /** Refused; nothing changes hands. */
        record Refused(Refusal reason) implements Redeemed {
        }
    }

    private record Entry(Object owner, int[] fds, Optional<Credentials> expected, long expiresAtNanos) {
    }

    private final int maxOffers;
    private final int maxRegions;
    private final long ttlNanos;
    private final long lateArrivalNanos;
    private final IntConsumer closer;
    /** Guarded by {@code this}; insertion order is expiry order (one TTL for all). */
    private final Map<DescriptorTicket, Entry> offers = new LinkedHashMap<>();
    /** Guarded by {@code this}; insertion order is expiry order. */
    private final Map<DescriptorTicket, Entry> regions = new LinkedHashMap<>();

    /** A table whose requests are judged when they are read ({@code lateArrivalNanos} 0). */
    DescriptorTable(int maxOffers, int maxRegions, long ttlNanos, IntConsumer closer) {
        this(maxOffers, maxRegions, ttlNanos, 0, closer);
    }

    /**
     * @param lateArrivalNanos how long after its expiry an entry is kept for a request that arrived
     *                         before the expiry and is still being read
     */
    DescriptorTable(int maxOffers, int maxRegions, long ttlNanos, long lateArrivalNanos, IntConsumer closer) {
        if (maxOffers < 1 || maxRegions < 1) throw new IllegalArgumentException("table bounds must be >= 1");
        if (ttlNanos <= 0) throw new IllegalArgumentException("ttlNanos must be positive: " + ttlNanos);
        if (lateArrivalNanos < 0) throw new IllegalArgumentException("lateArrivalNanos must be >= 0: " + lateArrivalNanos);
        this.lateArrivalNanos = lateArrivalNanos;
        this.maxOffers = maxOffers;
        this.maxRegions = maxRegions;
        this.ttlNanos = ttlNanos;
        this.closer = Objects.requireNonNull(closer, "closer");
    }

    /**
     * Offers {@code fds} (now the table's) to {@code expected} for session {@code owner}; the new
     * ticket, or empty (and {@code fds} closed) when {@code maxOffers} are live.
     */
    synchronized Optional<DescriptorTicket> offer(Object owner, int[] fds, Optional<Credentials> expected, long nowNanos) {
        return put(offers, maxOffers, owner, fds, expected, nowNanos);
    }

    /** Parks a region descriptor {@code fd} (now the table's) handed over by {@code from}; its handle, or empty when full. */
    synchronized Optional<DescriptorTicket> park(int fd, Credentials from, long nowNanos) {
        return put(regions, maxRegions, null, new int[] {fd}, Optional.of(from), nowNanos);
    }

    private Optional<DescriptorTicket> put(Map<DescriptorTicket, Entry> table, int max, Object owner, int[] fds,
                                           Optional<Credentials> expected, long nowNanos) {
        expire(table, nowNanos);
        if (table.size() >= max) {
            for (int fd : fds) closer.accept(fd);
            return Optional.empty();
        }
        DescriptorTicket ticket = DescriptorTicket.random();
        table.put(ticket, new Entry(owner, fds.clone(), expected, nowNanos + ttlNanos));
        return Optional.of(ticket);
    }

    /** Redeems the arena offer {@code ticket} for a process with {@code presented} credentials. */
    synchronized Redeemed redeem(DescriptorTicket ticket, Credentials presented, long nowNanos) {
        return take(offers, ticket, Optional.of(presented), nowNanos, nowNanos);
    }

    /**
     * Redeems the arena offer {@code ticket} for a request that arrived at {@code arrivedAtNanos}
     * (judged then) and is redeemed at {@code nowNanos}.
     */
    synchronized Redeemed redeem(DescriptorTicket ticket, Credentials presented, long arrivedAtNanos, long nowNanos) {
        return take(offers, ticket, Optional.of(presented), arrivedAtNanos, nowNanos);
    }

    /** Claims the parked region {@code handle} for a session whose client has {@code presented} credentials. */
    synchronized Redeemed claim(DescriptorTicket handle, Optional<Credentials> presented, long nowNanos) {
        return take(regions, handle, presented, nowNanos, nowNanos);
    }

    private Redeemed take(Map<DescriptorTicket, Entry> table, DescriptorTicket ticket, Optional<Credentials> presented,
                          long arrivedAtNanos, long nowNanos) {
        Entry e = table.remove(ticket);
        if (e == null) {
            expire(table, nowNanos);
            return new Redeemed.Refused(Refusal.UNKNOWN);
        }
        if (arrivedAtNanos - e.expiresAtNanos() >= 0) {
            close(e);
            expire(table, nowNanos);
            return new Redeemed.Refused(Refusal.EXPIRED);
        }
        if (e.expected().isEmpty() || presented.isEmpty() || !e.expected().get().equals(presented.get())) {
            close(e);
            return new Redeemed.Refused(Refusal.WRONG_PEER);
        }
        return new Redeemed.Granted(e.fds());
    }

    /** Drops session {@code owner}'s unredeemed offers, closing their descriptors. */
    synchronized void release(Object owner) {
        for (Iterator<Entry> it = offers.values().iterator(); it.hasNext(); ) {
            Entry e = it.next();
            if (e.owner() == owner) {
                it.remove();
                close(e);
            }
        }
    }

    /** Live arena offers at {@code nowNanos} (expired ones are dropped first). */
    synchronized int offers(long nowNanos) {
        expire(offers, nowNanos);
        return live(offers, nowNanos);
    }

    /** Live parked regions at {@code nowNanos}. */
    synchronized int regions(long nowNanos) {
        expire(regions, nowNanos);
        return live(regions, nowNanos);
    }

    /** Entries not expired at {@code nowNanos} (those kept for a late arrival are not counted). */
    private static int live(Map<DescriptorTicket, Entry> table, long nowNanos) {
        int n = 0;
        for (Entry e : table.values()) if (nowNanos - e.expiresAtNanos() < 0) n++;
        return n;
    }

    /** Closes every descriptor held; the table is empty afterwards. */
    synchronized void clear() {
        List<Entry> all = new ArrayList<>(offers.values());
        all.addAll(regions.values());
        offers.clear();
        regions.clear();
        for (Entry e : all) close(e);
    }

    private void expire(Map<DescriptorTicket, Entry> table, long nowNanos) {
        for (Iterator<Entry> it = table.values().iterator(); it.hasNext(); ) {
            Entry e = it.next();
            if (nowNanos - e.expiresAtNanos() < lateArrivalNanos) return; // insertion order is expiry order
            it.remove();
            close(e);
        }
    }

    private void close(Entry e) {
        for (int fd : e.fds()) closer.accept(fd);
    }
}
