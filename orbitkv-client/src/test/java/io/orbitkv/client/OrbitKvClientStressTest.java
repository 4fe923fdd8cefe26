package io.orbitkv.client;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.client.ScriptedManager.Out;
import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.ProtocolLimits;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.unix.UnixSocket;
import io.orbitkv.state.protocol.Request;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import io.orbitkv.testkit.StressTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * One client shared by many threads: every thread's blocking calls get their own replies while
 * the connection carries all of them pipelined, interleaved with COMPLETIONs of every thread's
 * operations. At the end no request is left pending and no operation is left routed.
 */
@StressTest
class OrbitKvClientStressTest {

    private static final int THREADS = 8;
    private static final int ROUNDS = 150;

    @TempDir
    Path dir;

    @Test
    void threadsSharingOneClientEachSeeTheirOwnRepliesAndCompletions() throws Exception {
        Map<Long, Integer> revisions = new ConcurrentHashMap<>();
        int arenaFd = UnixSocket.memfd("stress-arena", 1 << 16);
        ScriptedManager[] self = new ScriptedManager[1];
        try (ScriptedManager m = self[0] = new ScriptedManager(dir, (id, request) -> switch (request) {
            case Request.Register r -> List.of(new Out(id, self[0].registered(1, 1, List.of(new Reply.ArenaFile(1 << 16, 4096)))));
            case Request.QueryPoll p -> {
                revisions.put(p.operationId(), p.revision());
                yield List.of(new Out(id, new Reply.QueryResult(p.operationId(), p.revision(),
                        QueryStatus.FINAL, false, 0, List.of())));
            }
            case Request.Cancel c -> List.of(new Out(id, new Reply.Cancelled(c.operationId(), false, 0)),
                    new Out(0, new Reply.Completion(c.operationId(), revisions.get(c.operationId()),
                            CompletionEvent.DRAINED, Reply.Settled.OK)));
            case Request.Release r -> List.of(new Out(id, new Reply.Released(r.operationId(), true, 0)));
            default -> throw new AssertionError(request);
        }); OrbitKvClient client = OrbitKvClient.connect(m.socketPath, Duration.ofSeconds(20))) {
            m.arenas(arenaFd);
            client.register("engine-0", 1, OrbitKvClientTest.NS, OrbitKvClientTest.CONTRACT);
            ExecutorService pool = Executors.newFixedThreadPool(THREADS);
            List<Future<Integer>> done = new ArrayList<>();
            for (int t = 0; t < THREADS; t++) {
                long base = 1_000L * (t + 1);
                done.add(pool.submit(() -> {
                    int checked = 0;
                    for (int i = 0; i < ROUNDS; i++) {
                        long op = base + i;
                        assertThat(client.poll(op, i).operationId()).isEqualTo(op);
                        Reply.Cancelled c = i % 2 == 0 ? client.cancel(op) : null;
                        if (c != null) assertThat(c.operationId()).isEqualTo(op);
                        else assertThat(client.release(op).operationId()).isEqualTo(op);
                        checked++;
                    }
                    return checked;
                }));
            }
            int total = 0;
            for (Future<Integer> f : done) total += f.get();
            pool.shutdown();
            assertThat(total).isEqualTo(THREADS * ROUNDS);
            assertThat(m.received).hasSize(1 + 2 * THREADS * ROUNDS);
            assertThat(client.routedOperations()).as("every operation ended, nothing left routed").isZero();
        } finally {
            UnixSocket.close(arenaFd);
        }
    }
}
