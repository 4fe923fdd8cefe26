package io.orbitkv.core.engine;

import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.Reply;

import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;

import org.awaitility.Awaitility;

/** An {@link EventSink} that records what a session sent, for tests to wait on. */
final class RecordingSink implements EventSink {

    static final Duration WAIT = Duration.ofSeconds(20);

    final List<Reply.Completion> events = new CopyOnWriteArrayList<>();
    volatile ErrorCode fenced;

    @Override
    public boolean complete(Reply.Completion event) {
        events.add(event);
        return fenced == null;
    }

    @Override
    public void fence(ErrorCode code, String message) {
        fenced = code;
    }

    Optional<Reply.Completion> find(long operationId, CompletionEvent event) {
        return events.stream().filter(e -> e.operationId() == operationId && e.event() == event).findFirst();
    }

    Reply.Completion await(long operationId, CompletionEvent event) {
        Awaitility.await().atMost(WAIT).until(() -> find(operationId, event).isPresent());
        return find(operationId, event).orElseThrow();
    }
}
