package io.orbitkv.client;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.orbitkv.client.ScriptedManager.Out;
import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.Hashes;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import io.orbitkv.state.unix.UnixSocket;
import java.io.InterruptedIOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Who reads the socket ({@link FrameChannel}): a blocking caller reads its own reply, a second
 * caller waits as a follower and takes the socket over when the first leaves, and the reader
 * thread reads what arrives once no caller waits. Each test would hang to its timeout, or fail,
 * if a role were not handed on.
 */
class FrameChannelReadersTest {

    @TempDir
    Path dir;
    int arenaFd;
    /** Request ids of the QUERY_POLLs the scripted Manager left unanswered, by operation id. */
    final Map<Long, Long> unanswered = new ConcurrentHashMap<>();

    @BeforeEach
    void arena() {
        arenaFd = UnixSocket.memfd("readers-arena", 1 << 16);
    }

    @AfterEach
    void closeArena() {
        UnixSocket.close(arenaFd);
    }

    /** Answers REGISTER, STATS, a RELEASE as still draining and a QUERY with a miss; leaves every QUERY_POLL unanswered. */
    ScriptedManager manager() throws Exception {
        ScriptedManager[] self = new ScriptedManager[1];
        self[0] = new ScriptedManager(dir, (id, request) -> switch (request) {
            case Request.Register r -> List.of(new Out(id, self[0].registered(1, 1, List.of(new Reply.ArenaFile(1 << 16, 4096)))));
            case Request.Stats s -> List.of(new Out(id, new Reply.StatsReply(List.of(new Reply.Counter("query_hits", 3)))));
            case Request.Release r -> List.of(new Out(id, new Reply.Released(r.operationId(), false, 1)));
            case Request.Query q -> List.of(new Out(id, new Reply.QueryResult(q.operationId(), q.revision(),
                    QueryStatus.FINAL, false, 0, List.of())));
            case Request.QueryPoll p -> {
                unanswered.put(p.operationId(), id);
                yield List.of();
            }
            default -> throw new AssertionError(request);
        });
        self[0].arenas(arenaFd);
        return self[0];
    }

    OrbitKvClient connect(ScriptedManager m, Duration timeout) throws Exception {
        OrbitKvClient c = OrbitKvClient.connect(m.socketPath, timeout);
        c.register("engine-0", 1, OrbitKvClientTest.NS, OrbitKvClientTest.CONTRACT);
        return c;
    }

    @Test
    void aCompletionThatArrivesWhenNoCallerWaitsReachesItsFuture() throws Exception {
        try (ScriptedManager m = manager(); OrbitKvClient client = connect(m, Duration.ofSeconds(10))) {
            assertThat(client.stats()).containsEntry("query_hits", 3L); // read by the calling thread

            CompletableFuture<Reply.Released> released = client.releaseAsync(4);
            awaitCondition(() -> m.received.size() == 3, "the RELEASE reached the Manager");
            assertThat(released).as("RELEASED said draining: the future waits for DRAINED").isNotDone();
            m.push(new Out(0, new Reply.Completion(4, 0, CompletionEvent.DRAINED, Reply.Settled.OK)));

            // Waited on directly, not through the client: only the reader thread reads for it.
            assertThat(released.get(5, TimeUnit.SECONDS).operationId()).isEqualTo(4);
        }
    }

    @Test
    void atAnEnginesCadenceCallsAndTheCompletionsBetweenThemAreRead() throws Exception {
        try (ScriptedManager m = manager(); OrbitKvClient client = connect(m, Duration.ofSeconds(10))) {
            for (int round = 0; round < 3; round++) {
                // An engine's pause between requests: the reader thread is waiting for the socket
                // when the next call comes, and is woken by that call's reply as well.
                Thread.sleep(1_000);
                assertThat(client.stats()).containsEntry("query_hits", 3L);
                long op = 10 + round;
                int before = m.received.size();
                CompletableFuture<Reply.Released> released = client.releaseAsync(op);
                awaitCondition(() -> m.received.size() == before + 1, "the RELEASE reached the Manager");
                m.push(new Out(0, new Reply.Completion(op, 0, CompletionEvent.DRAINED, Reply.Settled.OK)));
                assertThat(released.get(5, TimeUnit.SECONDS).operationId()).as("round %d", round).isEqualTo(op);
            }
        }
    }

    @Test
    void aReleaseAnsweredButNotYetReadLetsTheNextHitOfItsIdPipelineItsRestore() throws Exception {
        Path regionFile = dir.resolve("region");
        Reply.Lease lease = new Reply.Lease(0, 0, 512);
        AtomicBoolean holdQueries = new AtomicBoolean();
        AtomicLong heldQuery = new AtomicLong();
        ScriptedManager[] self = new ScriptedManager[1];
        try (ScriptedManager m = self[0] = new ScriptedManager(dir, (id, request) -> switch (request) {
            case Request.Register r -> List.of(new Out(id, self[0].registered(1, 1, List.of(new Reply.ArenaFile(1 << 16, 4096)))));
            case Request.RegisterRegion r -> List.of(new Out(id, new Reply.RegionRegistered(3)));
            case Request.Query q when !holdQueries.get() ->
                    List.of(new Out(id, OrbitKvClientTest.hit(q.operationId(), q.revision(), QueryStatus.FINAL, lease)));
            case Request.Query q -> {
                heldQuery.set(id); // answered only once its RESTORE is here: a client that waits for it in between hangs
                yield List.of();
            }
            case Request.Restore r -> List.of(
                    new Out(heldQuery.get(), OrbitKvClientTest.hit(r.operationId(), 1, QueryStatus.FINAL, lease)),
                    new Out(id, new Reply.RestoreAccepted(r.operationId(), r.pages().size())),
                    new Out(0, new Reply.Completion(r.operationId(), 1, CompletionEvent.RESTORE_DONE, Reply.Settled.OK)));
            case Request.Release r -> {
                unanswered.put(r.operationId(), id); // the test answers it
                yield List.of();
            }
            default -> throw new AssertionError(request);
        }); OrbitKvClient client = OrbitKvClient.connect(m.socketPath, Duration.ofSeconds(3), Duration.ofHours(1))) {
            m.arenas(arenaFd);
            client.register("engine-0", 1, OrbitKvClientTest.NS, OrbitKvClientTest.CONTRACT);
            Region region = client.registerRegion(regionFile, 1024, 4);
            Request.Query query = OrbitKvClientTest.query(4, 1, CompletionTarget.ENGINE_RESTORE);
            assertThat(client.query(query).hit()).isTrue();
            client.releaseAsync(4);
            awaitCondition(() -> unanswered.containsKey(4L), "the RELEASE reached the Manager");
            // RELEASED is in the client's socket now; its reader thread waits an hour after a call.
            m.push(new Out(unanswered.get(4L), new Reply.Released(4, true, 1)));
            holdQueries.set(true);

            OrbitKvClient.Restored restored = client.queryAndRestore(query, region, List.of(new Request.RestorePage(0, 0, 1)));

            assertThat(restored.restoredOk()).isTrue();
            assertThat(client.routedOperations()).as("only the new hit of id 4 is routed").isEqualTo(1);
        }
    }

    @Test
    void aLostConnectionIsNoticedWithoutACall() throws Exception {
        ScriptedManager m = manager();
        try (OrbitKvClient client = connect(m, Duration.ofSeconds(60))) {
            CompletableFuture<Reply.Released> released = client.releaseAsync(4);
            awaitCondition(() -> m.received.size() == 2, "the RELEASE reached the Manager");

            m.close(); // the Manager goes away while no call waits

            assertThatThrownBy(() -> released.get(5, TimeUnit.SECONDS)).as("the DRAINED it waited for fails")
                    .hasCauseInstanceOf(UncheckedIOException.class);
            assertThatThrownBy(client::stats).isInstanceOf(UncheckedIOException.class);
        } finally {
            m.close();
        }
    }

    @Test
    void aFollowerTakesTheSocketOverWhenTheLeaderLeaves() throws Exception {
        try (ScriptedManager m = manager(); OrbitKvClient client = connect(m, Duration.ofSeconds(20))) {
            CompletableFuture<Throwable> leader = new CompletableFuture<>();
            Thread first = Thread.ofPlatform().start(() -> {
                try {
                    client.poll(1, 0);
                    leader.complete(null);
                } catch (Throwable t) {
                    leader.complete(t);
                }
            });
            awaitCondition(() -> unanswered.containsKey(1L), "the first poll reached the Manager");
            CompletableFuture<Reply.QueryResult> follower = CompletableFuture.supplyAsync(() -> client.poll(2, 0),
                    runnable -> Thread.ofPlatform().start(runnable));
            awaitCondition(() -> unanswered.containsKey(2L), "the second poll reached the Manager");

            first.interrupt(); // the first caller gives up: whoever read for it must hand the socket on
            assertThat(leader.get(5, TimeUnit.SECONDS)).isInstanceOf(UncheckedIOException.class)
                    .hasCauseInstanceOf(InterruptedIOException.class);
            m.push(new Out(unanswered.get(2L), new Reply.QueryResult(2, 0, QueryStatus.FINAL, false, 0, List.of())));

            assertThat(follower.get(5, TimeUnit.SECONDS).operationId()).isEqualTo(2);
        }
    }

    @Test
    void closingTheClientEndsACallThatIsReadingTheSocket() throws Exception {
        try (ScriptedManager m = manager()) {
            OrbitKvClient client = connect(m, Duration.ofSeconds(60));
            CompletableFuture<Reply.QueryResult> waiting = CompletableFuture.supplyAsync(() -> client.poll(1, 0),
                    runnable -> Thread.ofPlatform().start(runnable));
            awaitCondition(() -> unanswered.containsKey(1L), "the poll reached the Manager");

            client.close();

            assertThatThrownBy(() -> waiting.get(5, TimeUnit.SECONDS))
                    .hasCauseInstanceOf(UncheckedIOException.class);
        }
    }

    @Test
    void aRequestLargerThanTheSocketBufferGoesOutWhole() throws Exception {
        int count = 20_000; // 640 KB of hashes: more than a Unix socket's send buffer takes at once
        List<byte[]> hashes = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            byte[] h = new byte[32];
            for (int b = 0; b < 32; b++) h[b] = (byte) (i * 7 + b);
            hashes.add(h);
        }
        Request.Query big = new Request.Query(9, 1, CompletionTarget.HOST_READY, 16L * count, 0, 0, 0,
                List.of(new Request.QueryGroup(0, KeyForm.BLOCK_HASH, Hashes.of(hashes))));
        try (ScriptedManager m = manager(); OrbitKvClient client = connect(m, Duration.ofSeconds(20))) {
            assertThat(client.query(big).operationId()).isEqualTo(9);

            Request.Query got = (Request.Query) m.received.getLast();
            Hashes sent = got.groups().getFirst().hashes();
            assertThat(sent.count()).isEqualTo(count);
            for (int i = 0; i < count; i += 997) assertThat(sent.get(i)).isEqualTo(hashes.get(i));
            assertThat(sent.get(count - 1)).isEqualTo(hashes.getLast());
            assertThat(client.stats()).as("the connection goes on after it").containsEntry("query_hits", 3L);
        }
    }

    private static void awaitCondition(Callable<Boolean> condition, String what) {
        Awaitility.await(what).atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(2)).until(condition);
    }
}
