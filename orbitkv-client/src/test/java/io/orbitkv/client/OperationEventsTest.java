package io.orbitkv.client;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Reply;
import java.io.UncheckedIOException;
import java.io.IOException;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/** COMPLETION routing in the order the reader thread sees frames (protocol.md 9.3). */
class OperationEventsTest {

    private final OperationEvents events = new OperationEvents();

    private static Reply.QueryResult pending(long op, int revision) {
        return new Reply.QueryResult(op, revision, QueryStatus.PENDING, false, 0, List.of());
    }

    private static Reply.Completion completion(long op, int revision, CompletionEvent event) {
        return new Reply.Completion(op, revision, event, Reply.Settled.OK);
    }

    @Test
    void aCompletionOfAnOlderRevisionDoesNotSettleTheNewOne() {
        events.onFrame(pending(1, 1));
        events.onFrame(pending(1, 2));
        events.onFrame(completion(1, 1, CompletionEvent.QUERY_SETTLED));
        CompletableFuture<Reply.Completion> settled = events.await(1, CompletionEvent.QUERY_SETTLED);
        assertThat(settled).isNotDone();
        events.onFrame(completion(1, 2, CompletionEvent.QUERY_SETTLED));
        assertThat(settled).isCompletedWithValue(completion(1, 2, CompletionEvent.QUERY_SETTLED));
    }

    @Test
    void aCompletionThatArrivesBeforeTheCallerAwaitsIsKept() {
        events.onFrame(new Reply.RestoreAccepted(4, 2));
        Reply.Completion failed = new Reply.Completion(4, 0, CompletionEvent.RESTORE_DONE, new Reply.Failed(ErrorCode.INTERNAL));
        events.onFrame(failed);
        assertThat(events.await(4, CompletionEvent.RESTORE_DONE)).isCompletedWithValue(failed);
    }

    @Test
    void aSecondRestoreWaitsForItsOwnRestoreDone() {
        events.onFrame(new Reply.RestoreAccepted(4, 1));
        events.onFrame(completion(4, 0, CompletionEvent.RESTORE_DONE));
        events.onFrame(new Reply.RestoreAccepted(4, 1));
        assertThat(events.await(4, CompletionEvent.RESTORE_DONE)).isNotDone();
    }

    @Test
    void drainedEndsTheOperationOnceTakenAndADrainedReplyAtOnce() {
        events.onFrame(pending(2, 0));
        events.onFrame(new Reply.Cancelled(2, false, 0));
        events.onFrame(completion(2, 0, CompletionEvent.DRAINED));
        assertThat(events.takeDrained(2)).isDone();
        assertThat(events.size()).isZero();

        events.onFrame(pending(3, 0));
        events.onFrame(new Reply.Released(3, false, 0));
        CompletableFuture<Reply.Completion> drained = events.takeDrained(3);
        assertThat(events.size()).isEqualTo(1);
        events.onFrame(completion(3, 0, CompletionEvent.DRAINED));
        assertThat(drained).isDone();
        assertThat(events.size()).isZero();

        events.onFrame(pending(5, 0));
        events.onFrame(new Reply.Released(5, true, 3));
        assertThat(events.size()).isZero();
    }

    @Test
    void anOperationIdReusedAfterItEndedStartsAfreshAtAnyRevision() {
        events.onFrame(pending(7, 9));
        events.onFrame(new Reply.Released(7, false, 0));
        events.onFrame(completion(7, 9, CompletionEvent.DRAINED));
        events.onFrame(pending(7, 0));
        CompletableFuture<Reply.Completion> settled = events.await(7, CompletionEvent.QUERY_SETTLED);
        events.onFrame(completion(7, 0, CompletionEvent.QUERY_SETTLED));
        assertThat(settled).isDone();
    }

    @Test
    void aLostConnectionFailsEveryWaiterAndEveryLaterOne() {
        events.onFrame(pending(1, 0));
        CompletableFuture<Reply.Completion> settled = events.await(1, CompletionEvent.QUERY_SETTLED);
        UncheckedIOException lost = new UncheckedIOException(new IOException("lost"));
        events.failAll(lost);
        assertThat(settled).isCompletedExceptionally();
        assertThat(events.await(9, CompletionEvent.RESTORE_DONE)).isCompletedExceptionally();
        assertThat(events.size()).isZero();
    }
}
