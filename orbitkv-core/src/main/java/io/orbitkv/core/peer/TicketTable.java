package io.orbitkv.core.peer;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * The source Manager's table of peer-read tickets: each ticket owns one {@link PinnedImage}
 * (the exact generation a requester was authorized to read) until it is freed.
 *
 * <p>Owns: at most {@code ticketTableEntries} tickets and their pins. Ticket ids are issued
 * from 1 upwards and never reused in one table's life.
 *
 * <p>Thread model: every method is thread-safe under the table's monitor; pins are released
 * inside it ({@link PinnedImage#release()} is one CAS on a DRAM lease, never I/O). Time comes in
 * as {@code nowNanos} (one monotonic clock for the whole table), so tests drive expiry.
 *
 * <p>Invariants: a pin is released exactly once, and only when its ticket reaches
 * {@link TicketState#FREED}; a ticket with a running transfer is never FREED (see
 * {@link TicketState}); a transfer starts only on a ticket that accepts it, for the requester
 * incarnation it was issued to, before its window ends; {@code size() <= ticketTableEntries}.
 *
 * <p>Design note: one monitor rather than a concurrent map, because every operation is a few
 * field writes (~50 ns) and peer reads run at ≤ 10⁴ tickets/s per source (2 MiB pages at
 * 10 GB/s is 5,000/s), far below where a monitor contends. Window expiry is the backstop for lost
 * releases, not the normal path: a requester releases right after commit, so tickets live one
 * transfer time (~0.2 ms for 2 MiB) and a table of 4,096 entries covers 20 GB of pinned bytes in
 * flight at 2 MiB — the DRAM tier's reservation budget is the tighter bound.
 */
public final class TicketTable {

    /** A ticket as seen from outside: its id and where its window ends. */
    public record Issued(long ticketId, long windowEndNanos) {}

    /** Outcome of {@link #issue}. */
    public sealed interface IssueResult {
        record Granted(Issued ticket) implements IssueResult {}

        /** {@code ticketTableEntries} tickets exist; the caller still owns (and must release) its pin. */
        record Full(int ticketTableEntries) implements IssueResult {}
    }

    /** Why {@link #beginTransfer} refused. */
    public enum TransferRefusal {
        /** No such ticket (never issued, or already freed). */
        UNKNOWN_TICKET,
        /** The ticket belongs to another requester or another incarnation of it. */
        WRONG_REQUESTER,
        /** The ticket's window has passed. */
        WINDOW_PASSED,
        /** The ticket was released or revoked; it drains. */
        NOT_ACCEPTING
    }

    /** Outcome of {@link #beginTransfer}. */
    public sealed interface BeginResult {
        /** The transfer may read {@code image} until it calls {@link #endTransfer} exactly once. */
        record Reading(long ticketId, PinnedImage image) implements BeginResult {}

        record Refused(TransferRefusal reason) implements BeginResult {}
    }

    /** Outcome of {@link #release}. Releasing twice is harmless and says so. */
    public enum ReleaseOutcome {
        /** The pin was released now. */
        FREED,
        /** A transfer is still reading; the pin is released when it ends. */
        DEFERRED,
        /** Nothing to do: unknown, already freed, or already draining. */
        ALREADY_GONE,
        /** The ticket belongs to someone else; nothing changed. */
        WRONG_REQUESTER
    }

    private static final class Ticket {
        final long id;
        final NodeIncarnation requester;
        final PinnedImage image;
        final long windowEndNanos;
        TicketState state = TicketState.GRANTED;
        int transfers;

        Ticket(long id, NodeIncarnation requester, PinnedImage image, long windowEndNanos) {
            this.id = id;
            this.requester = requester;
            this.image = image;
            this.windowEndNanos = windowEndNanos;
        }
    }

    private final int ticketTableEntries;
    private final long windowNanos;
    // @GuardedBy("this")
    private final Map<Long, Ticket> tickets = new HashMap<>();
    // @GuardedBy("this")
    private long nextId = 1;
    // @GuardedBy("this")
    private long freedTotal;
    // @GuardedBy("this")
    private long expiredTotal;

    /**
     * @param ticketTableEntries most tickets alive at once
     * @param windowNanos        how long after issue a ticket may start transfers and is kept
     *                           without a release
     */
    public TicketTable(int ticketTableEntries, long windowNanos) {
        if (ticketTableEntries <= 0) throw new IllegalArgumentException("ticketTableEntries: " + ticketTableEntries);
        if (windowNanos <= 0) throw new IllegalArgumentException("windowNanos: " + windowNanos);
        this.ticketTableEntries = ticketTableEntries;
        this.windowNanos = windowNanos;
    }

    /** Issues a ticket that owns {@code image} from now on, or refuses when the table is full. */
    public synchronized IssueResult issue(NodeIncarnation requester, PinnedImage image, long nowNanos) {
        Objects.requireNonNull(requester, "requester");
        Objects.requireNonNull(image, "image");
        if (tickets.size() >= ticketTableEntries) return new IssueResult.Full(ticketTableEntries);
        Ticket t = new Ticket(nextId++, requester, image, nowNanos + windowNanos);
        tickets.put(t.id, t);
        return new IssueResult.Granted(new Issued(t.id, t.windowEndNanos));
    }

    /** Starts a transfer on {@code ticketId} for {@code requester}, if the ticket allows it now. */
    public synchronized BeginResult beginTransfer(long ticketId, NodeIncarnation requester, long nowNanos) {
        Ticket t = tickets.get(ticketId);
        if (t == null) return new BeginResult.Refused(TransferRefusal.UNKNOWN_TICKET);
        if (!t.requester.equals(requester)) return new BeginResult.Refused(TransferRefusal.WRONG_REQUESTER);
        if (!t.state.acceptsTransfer()) return new BeginResult.Refused(TransferRefusal.NOT_ACCEPTING);
        if (nowNanos - t.windowEndNanos >= 0) return new BeginResult.Refused(TransferRefusal.WINDOW_PASSED);
        t.transfers++;
        apply(t, TicketState.Event.BEGIN);
        return new BeginResult.Reading(t.id, t.image);
    }

    /** Ends one transfer begun with {@link #beginTransfer}; frees the ticket if it was draining. */
    public synchronized void endTransfer(long ticketId) {
        Ticket t = tickets.get(ticketId);
        if (t == null || t.transfers == 0) throw new IllegalStateException("no transfer running on ticket " + ticketId);
        t.transfers--;
        apply(t, TicketState.Event.END);
    }

    /** The requester is done with the ticket. Idempotent. */
    public synchronized ReleaseOutcome release(long ticketId, NodeIncarnation requester) {
        Ticket t = tickets.get(ticketId);
        if (t == null) return ReleaseOutcome.ALREADY_GONE;
        if (!t.requester.equals(requester)) return ReleaseOutcome.WRONG_REQUESTER;
        if (t.state == TicketState.DRAINING) return ReleaseOutcome.ALREADY_GONE;
        return apply(t, TicketState.Event.RELEASE) == TicketState.FREED ? ReleaseOutcome.FREED : ReleaseOutcome.DEFERRED;
    }

    /** Expires tickets whose window has passed; those with a running transfer only drain. Returns how many were freed. */
    public synchronized int onTick(long nowNanos) {
        int freed = 0;
        for (Ticket t : List.copyOf(tickets.values())) {
            if (nowNanos - t.windowEndNanos >= 0 && t.state != TicketState.DRAINING) {
                expiredTotal++;
                if (apply(t, TicketState.Event.EXPIRE) == TicketState.FREED) freed++;
            }
        }
        return freed;
    }

    /**
     * Membership changed: {@code current} is the incarnation now registered for its node id, or
     * the node is gone ({@link Optional#empty()} with {@code nodeId}). Tickets issued to any other
     * incarnation of that node are revoked (freed, or drained if a transfer runs).
     */
    public synchronized int onRequesterChanged(String nodeId, Optional<NodeIncarnation> current) {
        int revoked = 0;
        for (Ticket t : List.copyOf(tickets.values())) {
            if (t.requester.nodeId().equals(nodeId) && current.map(c -> !c.equals(t.requester)).orElse(true)
                    && t.state != TicketState.DRAINING) {
                apply(t, TicketState.Event.REQUESTER_GONE);
                revoked++;
            }
        }
        return revoked;
    }

    /** The state of {@code ticketId}, or empty when it was never issued or has been freed. */
    public synchronized Optional<TicketState> state(long ticketId) {
        Ticket t = tickets.get(ticketId);
        return t == null ? Optional.empty() : Optional.of(t.state);
    }

    /** Tickets alive (any state but FREED); each still holds its pin. */
    public synchronized int size() {
        return tickets.size();
    }

    /** Transfers currently reading pinned bytes. */
    public synchronized int activeTransfers() {
        int n = 0;
        for (Ticket t : tickets.values()) n += t.transfers;
        return n;
    }

    public synchronized long freedTotal() {
        return freedTotal;
    }

    public synchronized long expiredTotal() {
        return expiredTotal;
    }

    public int ticketTableEntries() {
        return ticketTableEntries;
    }

    /** Frees every ticket without a running transfer (shutdown); returns how many remain draining. */
    public synchronized int drainAll() {
        for (Ticket t : List.copyOf(tickets.values())) {
            if (t.state != TicketState.DRAINING) apply(t, TicketState.Event.RELEASE);
        }
        return tickets.size();
    }

    // @GuardedBy("this")
    private TicketState apply(Ticket t, TicketState.Event event) {
        t.state = t.state.on(event, t.transfers);
        if (t.state == TicketState.FREED) {
            tickets.remove(t.id);
            t.image.release();
            freedTotal++;
        }
        return t.state;
    }

    /** Ids of the tickets alive now, for status pages and tests. */
    public synchronized List<Long> ticketIds() {
        List<Long> ids = new ArrayList<>(tickets.keySet());
        ids.sort(Long::compare);
        return ids;
    }
}
