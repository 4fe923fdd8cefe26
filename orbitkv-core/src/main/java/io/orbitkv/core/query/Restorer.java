package io.orbitkv.core.query;

import io.orbitkv.core.cost.Terminal;
import io.orbitkv.core.transfer.EngineRegion;
import io.orbitkv.core.transfer.RestoreObservations;
import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * The RESTOREs of one FINAL hit: at most one in flight, its {@link RestoreBatch}, the pages it
 * copies, and its timings for the restore latency histogram and the cost sample.
 *
 * <p>Thread model: confined to the session lock, like its {@link QueryOperation}, except
 * {@code state}, which the copy threads read (volatile) to skip the pages of a stopped operation.
 * The batch's report re-enters under the lock: on the caller's thread for an inline copy, through
 * {@link QueryServices#callbacks()} for copier tasks.
 *
 * <p>States, all transitions in {@link #transition}: IDLE (no copy in flight) ⇄ COPYING (a
 * RESTORE's copies run) → STOPPING (the operation stopped while they ran: copies not yet started
 * skip their pages) → STOPPED; IDLE → STOPPED directly.
 *
 * <p>Invariants: the pages being copied stay leased (the operation releases nothing while
 * {@link #inFlight}); a RESTORE_DONE follows every accepted RESTORE exactly once, OK only if no copy
 * failed and the operation was not stopped; each leased page is restored at most once (READY after).
 */
final class Restorer {

    /** The restore's life; see the class comment. */
    enum State { IDLE, COPYING, STOPPING, STOPPED }

    private final QueryServices services;
    private final SessionCallback session;
    private final long operationId;
    private final int revision;
    private final Runnable onEnded;
    private final List<PageSlot> copying = new ArrayList<>();
    private volatile State state = State.IDLE;
    /** The RESTORE in flight: when it was accepted ({@link QueryServices#clock()}), its bytes and pages. */
    private long acceptedNanos;
    private long logicalBytes;
    private int pages;
    private RestoreObservations observations;

    /** @param onEnded called under the session lock after each RESTORE_DONE (the operation may drain then) */
    Restorer(QueryServices services, SessionCallback session, long operationId, int revision, Runnable onEnded) {
        this.services = services;
        this.session = session;
        this.operationId = operationId;
        this.revision = revision;
        this.onEnded = onEnded;
    }

    /** Whether a RESTORE's copies are running (or a stopped one's have not all ended). */
    boolean inFlight() {
        return switch (state) {
            case COPYING, STOPPING -> true;
            case IDLE, STOPPED -> false;
        };
    }

    /**
     * Checks a RESTORE of the leased pages of {@code spans} into {@code region} and starts its
     * copies: a small one (by bytes) on the caller's thread through
     * {@link QueryOperation.Restoring#copyHere}, a larger one as copier tasks.
     */
    QueryOperation.Restoring start(Request.Restore request, EngineRegion region, List<QueryPlan.SlotSpan> spans) {
        Optional<Reply.Error> refused = refusal(request, region, spans);
        if (refused.isPresent()) return QueryOperation.Restoring.refused(refused.get());
        List<PageSlot> sources = new ArrayList<>(request.pages().size());
        List<MemorySegment> targets = new ArrayList<>(request.pages().size());
        long bytes = 0;
        for (Request.RestorePage rp : request.pages()) {
            PageSlot slot = find(spans, rp.groupId(), rp.sourcePage()).orElseThrow();
            sources.add(slot);
            targets.add(region.page(rp.destinationPage(), slot.lease.lengthBytes()));
            bytes += slot.lease.lengthBytes();
        }
        boolean inline = bytes <= services.bounds().restoreInlineBytes();
        RestoreBatch batch = new RestoreBatch(sources, targets, region, () -> state == State.STOPPING, copied -> {
            if (inline) {
                synchronized (session.lock()) {
                    onCopied(copied);
                }
            } else {
                // a copy thread never waits on a session lock: one hop per batch, by its last share
                services.callbacks().execute(() -> {
                    synchronized (session.lock()) {
                        onCopied(copied);
                    }
                });
            }
        });
        if (!inline && !services.copier().trySubmit(batch.shares(services.copier().parallelism()))) {
            return QueryOperation.Restoring.refused(new Reply.Error(ErrorCode.BUSY, "restore copy queue is full"));
        }
        transition(State.COPYING);
        acceptedNanos = services.clock().getAsLong();
        pages = sources.size();
        logicalBytes = bytes;
        copying.clear();
        copying.addAll(sources);
        Runnable copyHere = !inline ? () -> { }
                : shared(sources.size(), bytes) ? () -> batch.copyShared(services.copier()::tryHelp)
                : batch::copyAll;
        return new QueryOperation.Restoring(new Reply.RestoreAccepted(operationId, request.pages().size()), copyHere);
    }

    /**
     * Whether an inline restore offers its pages to an idle copy thread as well: two pages or
     * more and at least a sixteenth of the inline bound (1 MiB by default, about 60 µs of copying,
     * where a wake-up of the other thread pays for itself; docs/performance.md, "A restore
     * shared with an idle copy thread").
     */
    private boolean shared(int pages, long bytes) {
        return pages >= 2 && bytes >= Math.max(1, services.bounds().restoreInlineBytes() / 16);
    }

    /** Why a RESTORE is refused before any byte of the region is written, if it is. */
    private Optional<Reply.Error> refusal(Request.Restore request, EngineRegion region, List<QueryPlan.SlotSpan> spans) {
        if (inFlight()) {
            return Optional.of(new Reply.Error(ErrorCode.BUSY, "a restore of operation " + operationId + " is in flight"));
        }
        if (region.isFaulted()) {
            return Optional.of(new Reply.Error(ErrorCode.NOT_FOUND, "region " + request.regionId() + " is unusable: a copy"
                    + " into it faulted (its file shrank or was replaced after REGISTER_REGION); register it again"));
        }
        for (Request.RestorePage rp : request.pages()) {
            Optional<PageSlot> slot = find(spans, rp.groupId(), rp.sourcePage());
            if (slot.isEmpty() || slot.get().lease == null) {
                return Optional.of(new Reply.Error(ErrorCode.NOT_FOUND, "source page " + rp.sourcePage() + " of group "
                        + rp.groupId() + " is not leased by operation " + operationId));
            }
            if (rp.destinationPage() >= region.pageCount()) {
                return Optional.of(new Reply.Error(ErrorCode.INVALID_DEMAND, "destination page " + rp.destinationPage()
                        + " is outside the region's " + region.pageCount() + " pages"));
            }
            if (slot.get().lease.lengthBytes() > region.pageBytes()) {
                return Optional.of(new Reply.Error(ErrorCode.NAMESPACE_MISMATCH, "page image of "
                        + slot.get().lease.lengthBytes() + " bytes exceeds the region's page_bytes " + region.pageBytes()));
            }
            // A READY page was copied and fenced by an earlier RESTORE of this operation: the protocol
            // restores each leased page once (its source must be RESIDENT), so a repeat is refused
            // before any byte of the region is written again.
            if (slot.get().state == PageSlot.State.READY) {
                return Optional.of(new Reply.Error(ErrorCode.INVALID_DEMAND, "source page " + rp.sourcePage() + " of group "
                        + rp.groupId() + " is READY: operation " + operationId + " restored it already"));
            }
        }
        return Optional.empty();
    }

    /** Every copy of the RESTORE in flight ended: mark its pages READY, count it, send RESTORE_DONE. */
    private void onCopied(RestoreBatch.Copied copied) {
        boolean stopped = state == State.STOPPING;
        transition(stopped ? State.STOPPED : State.IDLE);
        Terminal terminal = stopped ? Terminal.CANCELLED : copied.failed() ? Terminal.FAILED : Terminal.SUCCEEDED;
        Reply.Outcome outcome = switch (terminal) {
            case SUCCEEDED -> {
                for (PageSlot p : copying) p.state = PageSlot.State.READY;
                yield Reply.Settled.OK;
            }
            case CANCELLED -> Reply.Settled.CANCELLED;
            case FAILED, TIMED_OUT -> new Reply.Failed(copied.regionFault() ? ErrorCode.NOT_FOUND : ErrorCode.INTERNAL);
        };
        long now = services.clock().getAsLong();
        services.metrics().countRestore(switch (terminal) {
            case SUCCEEDED -> QueryMetrics.RestoreOutcome.OK;
            case CANCELLED -> QueryMetrics.RestoreOutcome.CANCELLED;
            case FAILED, TIMED_OUT -> QueryMetrics.RestoreOutcome.FAILED;
        }, copied.byTier(), Math.max(0, now - acceptedNanos));
        observations().restored(terminal, logicalBytes, pages, copied.bytes(), acceptedNanos, now);
        copying.clear();
        session.emit(new Reply.Completion(operationId, revision, CompletionEvent.RESTORE_DONE, outcome));
        onEnded.run();
    }

    /** The operation stopped: copies not yet started skip their pages. True if copies are still in flight. */
    boolean stop() {
        switch (state) {
            case IDLE -> transition(State.STOPPED);
            case COPYING -> transition(State.STOPPING);
            case STOPPING, STOPPED -> { }
        }
        return inFlight();
    }

    private RestoreObservations observations() {
        if (observations == null) {
            observations = new RestoreObservations(services.store().costObserver(), services.copier().costResource());
        }
        return observations;
    }

    private static Optional<PageSlot> find(List<QueryPlan.SlotSpan> spans, int groupId, long page) {
        for (QueryPlan.SlotSpan s : spans) {
            if (s.groupId() == groupId && page >= s.firstPage() && page < s.firstPage() + s.pages().length) {
                return Optional.of(s.pages()[(int) (page - s.firstPage())]);
            }
        }
        return Optional.empty();
    }

    private void transition(State next) {
        boolean legal = switch (state) {
            case IDLE -> next == State.COPYING || next == State.STOPPED;
            case COPYING -> next == State.IDLE || next == State.STOPPING;
            case STOPPING -> next == State.STOPPED;
            case STOPPED -> false;
        };
        if (!legal) throw new IllegalStateException("restore of operation " + operationId + ": " + state + " -> " + next);
        state = next;
    }
}
