package io.orbitkv.client;

import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Reply;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

/**
 * Routes asynchronous COMPLETION frames to the operation that awaits them: per live operation id,
 * its current revision and one future per {@link CompletionEvent}. This is the only per-operation
 * state the client keeps; leases, pages and coverage stay with the Manager, which owns them.
 *
 * <p>Thread model: {@link #onFrame} is called by the thread that reads the channel (one at a
 * time, {@link FrameChannel}) with every reply before its future completes and every COMPLETION,
 * in arrival order; {@link #await} by any
 * caller. All state is guarded by {@code this}.
 *
 * <p>Invariants: a future is armed (replaced by a fresh one) by the reply that starts the work
 * it reports: QUERY_RESULT of a new revision arms QUERY_SETTLED, RESTORE_ACCEPTED arms
 * RESTORE_DONE, CANCELLED/RELEASED with {@code drained} = 0 arms DRAINED. Because the Manager
 * sends a COMPLETION only after that reply (protocol.md 9.3) and frames are handled in
 * order, a COMPLETION can never arrive before its future exists. A COMPLETION of an older
 * revision is ignored. An entry is dropped when the operation ends: at a drained reply, or, after
 * DRAINED, when the caller that sent the CANCEL/RELEASE takes the DRAINED future
 * ({@link #takeDrained}); so the table holds at most the connection's live and draining
 * operations, which the Manager bounds ({@code maxOperationsPerConnection}, 1,024 by default).
 * After {@link #failAll} every armed and every later future fails with the connection's cause.
 */
final class OperationEvents {

    /** The awaited events of one operation id. */
    private static final class Operation {
        int revision;
        boolean ended;
        final Map<CompletionEvent, CompletableFuture<Reply.Completion>> events = new EnumMap<>(CompletionEvent.class);

        Operation(int revision) {
            this.revision = revision;
        }

        CompletableFuture<Reply.Completion> arm(CompletionEvent event) {
            CompletableFuture<Reply.Completion> f = new CompletableFuture<>();
            events.put(event, f);
            return f;
        }
    }

    // @GuardedBy("this")
    private final Map<Long, Operation> operations = new HashMap<>();
    // @GuardedBy("this")
    private RuntimeException failure;

    /** Called by the channel's reading thread for each reply (before its future completes) and each COMPLETION. */
    synchronized void onFrame(Reply reply) {
        switch (reply) {
            case Reply.QueryResult r -> {
                Operation op = operations.get(r.operationId());
                if (op == null || op.ended || r.revision() > op.revision) {
                    op = new Operation(r.revision());
                    operations.put(r.operationId(), op);
                }
                if (r.revision() == op.revision && r.status() == QueryStatus.PENDING
                        && !op.events.containsKey(CompletionEvent.QUERY_SETTLED)) {
                    op.arm(CompletionEvent.QUERY_SETTLED);
                }
            }
            case Reply.RestoreAccepted r -> operation(r.operationId()).arm(CompletionEvent.RESTORE_DONE);
            case Reply.Cancelled c -> ended(c.operationId(), c.drained());
            case Reply.Released r -> ended(r.operationId(), r.drained());
            case Reply.Completion c -> {
                Operation op = operations.get(c.operationId());
                if (op == null || c.revision() < op.revision) return;
                CompletableFuture<Reply.Completion> f = op.events.get(c.event());
                if (f == null) f = op.arm(c.event());
                if (c.event() == CompletionEvent.DRAINED) op.ended = true;
                f.complete(c);
            }
            case Reply.Registered r -> {
                // no operation state
            }
            case Reply.RegionRegistered r -> {
                // no operation state
            }
            case Reply.Reserved r -> {
                // no operation state
            }
            case Reply.Committed r -> {
                // no operation state
            }
            case Reply.Aborted r -> {
                // no operation state
            }
            case Reply.StatsReply r -> {
                // no operation state
            }
            case Reply.Prepared r -> {
                // nothing awaited: a prepare's only event is DRAINED after a CANCEL that did not drain
            }
            case Reply.Hinted r -> {
                // no operation state
            }
            case Reply.Contained r -> {
                // no operation state
            }
            case Reply.Error e -> {
                // a refused request changes nothing on the Manager, so nothing here either
            }
        }
    }

    /**
     * The future of {@code event} for operation {@code operationId}, armed by the latest reply
     * that starts such work; a COMPLETION that already arrived has completed it.
     */
    synchronized CompletableFuture<Reply.Completion> await(long operationId, CompletionEvent event) {
        if (failure != null) return CompletableFuture.failedFuture(failure);
        Operation op = operation(operationId);
        CompletableFuture<Reply.Completion> f = op.events.get(event);
        return f != null ? f : op.arm(event);
    }

    /**
     * The DRAINED future of an operation whose CANCEL/RELEASE answered {@code drained} = 0; the
     * entry is dropped once DRAINED has arrived, so call this once, after that reply.
     */
    synchronized CompletableFuture<Reply.Completion> takeDrained(long operationId) {
        CompletableFuture<Reply.Completion> f = await(operationId, CompletionEvent.DRAINED);
        Operation op = operations.get(operationId);
        if (op != null && op.ended) operations.remove(operationId);
        else if (op != null) f = f.whenComplete((c, e) -> forgetEnded(operationId));
        return f;
    }

    /** The connection ended: every armed future and every later one fails with {@code cause}. */
    synchronized void failAll(RuntimeException cause) {
        if (failure == null) failure = cause;
        for (Operation op : operations.values()) {
            for (CompletableFuture<Reply.Completion> f : op.events.values()) f.completeExceptionally(failure);
        }
        operations.clear();
    }

    private synchronized void forgetEnded(long operationId) {
        Operation op = operations.get(operationId);
        if (op != null && op.ended) operations.remove(operationId);
    }

    /** True while {@code operationId} is live or draining as far as the replies seen so far tell. */
    synchronized boolean tracks(long operationId) {
        return operations.containsKey(operationId);
    }

    /** Operation ids this table tracks (for tests and diagnostics). */
    synchronized int size() {
        return operations.size();
    }

    private Operation operation(long operationId) {
        return operations.computeIfAbsent(operationId, id -> new Operation(0));
    }

    private void ended(long operationId, boolean drained) {
        if (drained) {
            operations.remove(operationId);
        } else {
            operation(operationId).arm(CompletionEvent.DRAINED);
        }
    }
}
