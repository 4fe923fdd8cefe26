package io.orbitkv.server.peer.bulk;

import io.orbitkv.core.peer.AuthorizeRequest;
import io.orbitkv.core.peer.AuthorizeResult;
import io.orbitkv.core.peer.PayloadTransport.FetchOutcome;
import io.orbitkv.core.peer.PayloadTransport.FetchSink;

import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;

/**
 * One BATCH_REQUEST in flight at the requester: its pages' requests, receivers and outcome
 * futures. Each page's future is completed exactly once — by the connection thread that serves
 * the batch, or, if no connection ever took it, by whoever fails it (pool closed, queue full).
 *
 * <p>Thread model: a batch is owned by one thread at a time (the submitter until it is queued, then
 * the connection that took it from the queue, or the closer that drained the queue); completing
 * an already completed future is a no-op, so a race at close cannot complete a page twice.
 */
final class BulkBatch {

    final long batchId;
    final List<AuthorizeRequest> requests;
    final List<? extends FetchSink> receivers;
    final List<CompletableFuture<FetchOutcome>> outcomes;

    BulkBatch(long batchId, List<AuthorizeRequest> requests, List<? extends FetchSink> receivers,
              List<CompletableFuture<FetchOutcome>> outcomes) {
        if (requests.size() != receivers.size() || requests.size() != outcomes.size() || requests.isEmpty()) {
            throw new IllegalArgumentException("a batch needs as many receivers and outcomes as requests");
        }
        this.batchId = batchId;
        this.requests = List.copyOf(requests);
        this.receivers = List.copyOf(receivers);
        this.outcomes = List.copyOf(outcomes);
        for (CompletableFuture<FetchOutcome> f : this.outcomes) Objects.requireNonNull(f, "outcome");
    }

    int size() {
        return requests.size();
    }

    boolean done(int index) {
        return outcomes.get(index).isDone();
    }

    void complete(int index, FetchOutcome outcome) {
        outcomes.get(index).complete(outcome);
    }

    /** Every page not yet answered is refused with {@code reason} (nothing was reserved for those). */
    void refuseRest(AuthorizeResult.Rejection reason) {
        for (CompletableFuture<FetchOutcome> f : outcomes) f.complete(new FetchOutcome.Rejected(reason));
    }

    BulkLayout.BatchRequest wire() {
        AuthorizeRequest first = requests.getFirst();
        return new BulkLayout.BatchRequest(batchId, first.requester(), first.sourceIncarnation(),
                requests.stream().map(BulkLayout.PageAsk::of).toList());
    }
}
