package io.orbitkv.core.peer;

import io.orbitkv.core.namespace.NamespaceTable;
import io.orbitkv.core.storage.StageResult;
import io.orbitkv.core.storage.TieredStore;
import io.orbitkv.core.storage.dram.AcquireResult;
import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.core.storage.ssd.Pin;
import io.orbitkv.core.storage.ssd.PinResult;
import io.orbitkv.core.peer.AuthorizeResult.Rejected;
import io.orbitkv.core.peer.AuthorizeResult.Rejection;

import java.util.Objects;
import java.util.OptionalInt;
import java.util.concurrent.CompletableFuture;
import java.util.function.LongSupplier;

/**
 * The source side of a peer read: authorizes a requester's {@link AuthorizeRequest} against this
 * Manager's own state, pins the exact generation in host memory and issues a ticket; then lets
 * a transport stream the pinned bytes under that ticket. No sockets: the gRPC service (server
 * module) calls {@link #authorize}, {@link #beginTransfer}/{@link #endTransfer} and
 * {@link #release}.
 *
 * <p>Owns the {@link TicketTable}; borrows the {@link TieredStore}, the {@link NamespaceTable}
 * and the {@link MemberView}.
 *
 * <p>Thread model: thread-safe. {@link #authorize} never blocks: a DRAM page is leased at once; an
 * SSD page is staged into this Manager's DRAM and the future completes on the SSD worker thread.
 *
 * <p>Authorization order (cheapest refusal first, nothing pinned until every check passed):
 * serving at all (membership valid) → source incarnation → requester incarnation (live in the
 * member view) → residency sequence (not ahead of this source's stream) → for DRAM, namespace
 * known → exact generation (or, for {@link AuthorizeRequest#CURRENT_GENERATION}, the current
 * image) of the page in the asked namespace pinned on the named medium (pages are identified by
 * namespace and key, so the same key bytes in another namespace are another page and the answer
 * is GENERATION_GONE, exactly as for a key nobody holds; for SSD the extent's digest is then
 * bound to a namespace id if no engine registered it since this start) → ticket issued. A
 * refusal after pinning releases the pin before answering.
 *
 * <p>Design note: an SSD page is always staged into the source's DRAM tier before sending, so the
 * transfer reads host memory only and the bounded host memory is the DRAM tier's reservation
 * budget plus {@code maxInflightStages} (a full tier answers {@link Rejection#SOURCE_BUSY}, the
 * requester then recomputes). Reading the extent straight into a per-transfer buffer would save
 * the DRAM slot but needs a second bounded pool and loses the chance that the staged copy serves
 * the next requester from DRAM.
 *
 * <p>After a restart the SSD store recovers pages (and the catalog advertises them) before any
 * engine REGISTERs their namespace, and only REGISTER used to fill the {@link NamespaceTable}: a
 * restarted source refused every peer read of its own SSD pages as NAMESPACE_MISMATCH. The
 * extent header records the page's namespace digest, which is the proof the check needs, so the
 * source binds that digest to an id on demand ({@link NamespaceTable#bind}) once an extent of
 * the requested digest is pinned; a digest no extent carries is never bound.
 */
public final class PeerSource {

    private final NodeIncarnation self;
    private final TieredStore store;
    private final NamespaceTable namespaces;
    private final MemberView members;
    private final TicketTable tickets;
    private final LongSupplier nanoClock;

    public PeerSource(NodeIncarnation self, TieredStore store, NamespaceTable namespaces, MemberView members,
                      TicketTable tickets, LongSupplier nanoClock) {
        this.self = Objects.requireNonNull(self, "self");
        this.store = Objects.requireNonNull(store, "store");
        this.namespaces = Objects.requireNonNull(namespaces, "namespaces");
        this.members = Objects.requireNonNull(members, "members");
        this.tickets = Objects.requireNonNull(tickets, "tickets");
        this.nanoClock = Objects.requireNonNull(nanoClock, "nanoClock");
    }

    /** Checks {@code request}, pins the page and issues a ticket; every refusal is a value. */
    public CompletableFuture<AuthorizeResult> authorize(AuthorizeRequest request) {
        Objects.requireNonNull(request, "request");
        Rejection early = precheck(request);
        if (early != null) return CompletableFuture.completedFuture(new Rejected(early));
        return switch (request.medium()) {
            case DRAM -> {
                // a DRAM image carries a namespace id, so its namespace was bound in this life
                OptionalInt namespaceId = namespaces.id(request.namespace());
                if (namespaceId.isEmpty()) yield CompletableFuture.completedFuture(new Rejected(Rejection.NAMESPACE_MISMATCH));
                yield CompletableFuture.completedFuture(switch (request.anyGeneration()
                        ? store.acquire(request.key(), namespaceId.getAsInt())
                        : store.acquireImage(request.key(), namespaceId.getAsInt(), request.generation())) {
                    case Lease lease -> grant(request, namespaceId.getAsInt(), lease);
                    case AcquireResult.Miss miss -> new Rejected(Rejection.GENERATION_GONE);
                });
            }
            case SSD -> authorizeFromSsd(request);
        };
    }

    private CompletableFuture<AuthorizeResult> authorizeFromSsd(AuthorizeRequest request) {
        // Check the generation of the namespace's extent under a pin, then stage: pages are immutable
        // per (namespace, key), so a staged image has the same bytes whichever generation it was
        // read from. Only the requested namespace's extent is looked up: one of the same key bytes
        // in another namespace is another page.
        int namespaceId;
        switch (store.pin(request.key(), request.namespace())) {
            case Pin pin -> {
                long generation = pin.generation();
                pin.close();
                if (!request.anyGeneration() && generation != request.generation()) {
                    return CompletableFuture.completedFuture(new Rejected(Rejection.GENERATION_GONE));
                }
                OptionalInt bound = namespaces.bind(request.namespace());
                if (bound.isEmpty()) return CompletableFuture.completedFuture(new Rejected(Rejection.SOURCE_BUSY));
                namespaceId = bound.getAsInt();
            }
            case PinResult.Miss miss -> {
                return CompletableFuture.completedFuture(new Rejected(Rejection.GENERATION_GONE));
            }
        }
        return store.stage(request.key(), namespaceId).thenApply(staged -> switch (staged) {
            case StageResult.Staged s -> grant(request, namespaceId, s.lease());
            case StageResult.Miss m -> new Rejected(Rejection.GENERATION_GONE);
            case StageResult.Busy b -> new Rejected(Rejection.SOURCE_BUSY);
        });
    }

    private Rejection precheck(AuthorizeRequest request) {
        if (!members.validForRemoteWork()) return Rejection.NOT_SERVING;
        if (request.sourceIncarnation() != self.incarnation()) return Rejection.STALE_SOURCE_INCARNATION;
        boolean requesterLive = members.live(request.requester().nodeId())
                .map(request.requester()::equals).orElse(false);
        if (!requesterLive) return Rejection.STALE_REQUESTER_INCARNATION;
        if (request.residencySequence() > store.residency().lastSequence()) return Rejection.SEQUENCE_AHEAD;
        return null;
    }

    private AuthorizeResult grant(AuthorizeRequest request, int namespaceId, Lease lease) {
        if (lease.namespaceId() != namespaceId) {
            lease.release();
            return new Rejected(Rejection.NAMESPACE_MISMATCH);
        }
        return switch (tickets.issue(request.requester(), new LeasedImage(lease, request.generation()), nanoClock.getAsLong())) {
            case TicketTable.IssueResult.Granted g -> new AuthorizeResult.Granted(g.ticket().ticketId(), self.incarnation(),
                    request.key(), lease.lengthBytes(), g.ticket().windowEndNanos() - nanoClock.getAsLong());
            case TicketTable.IssueResult.Full f -> {
                lease.release();
                yield new Rejected(Rejection.TICKET_TABLE_FULL);
            }
        };
    }

    /** Starts streaming under {@code ticketId}; the caller must {@link #endTransfer} exactly once after a Reading. */
    public TicketTable.BeginResult beginTransfer(long ticketId, NodeIncarnation requester) {
        return tickets.beginTransfer(ticketId, requester, nanoClock.getAsLong());
    }

    /** The transfer stopped reading (sent, failed or cancelled). */
    public void endTransfer(long ticketId) {
        tickets.endTransfer(ticketId);
    }

    /** The requester is done; idempotent. */
    public TicketTable.ReleaseOutcome release(long ticketId, NodeIncarnation requester) {
        return tickets.release(ticketId, requester);
    }

    /** Drives window expiry; call from the Manager's housekeeping tick. */
    public int onTick() {
        return tickets.onTick(nanoClock.getAsLong());
    }

    public NodeIncarnation self() {
        return self;
    }

    public TicketTable tickets() {
        return tickets;
    }
}
