package io.orbitkv.client;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.orbitkv.client.ScriptedManager.Out;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.Hashes;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.ProtocolLimits;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Refusal;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.unix.UnixSocket;
import io.orbitkv.state.protocol.Request;
import io.orbitkv.state.protocol.SettleOutcome;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The client against a {@link ScriptedManager}: exact frame sequences of protocol.md, real
 * shared files, no Manager logic. Checks that REGISTERED's arenas are mapped and written where
 * granted, that replies and COMPLETIONs are routed to the right waiter, that errors surface as
 * {@link OrbitKvException} and that close unmaps.
 */
class OrbitKvClientTest {

    static final Namespace NS = new Namespace("m", "r", "sha256:w", "sha256:t", "", "bf16", "nhd", 16, 1, 0, 1, 0, 1);
    static final RecoveryContract CONTRACT = new RecoveryContract(16, List.of(new StateGroup.Full(0)));
    static final int SLOT = 4096;

    @TempDir
    Path dir;
    /** The arena: a memfd the scripted descriptor socket passes, seen by the test through its own descriptor. */
    int arenaFd;
    Path arenaFile;

    @BeforeEach
    void arena() {
        arenaFd = UnixSocket.memfd("test-arena", 16L * SLOT);
        assertThat(arenaFd).isNotNegative();
        arenaFile = Path.of("/proc/self/fd/" + arenaFd);
    }

    @org.junit.jupiter.api.AfterEach
    void closeArena() {
        UnixSocket.close(arenaFd);
    }

    /** Answers REGISTER (with the arena) and STATS; everything else by {@code rest}. */
    ScriptedManager manager(ScriptedManager.Script rest) throws IOException {
        ScriptedManager[] self = new ScriptedManager[1];
        self[0] = new ScriptedManager(dir, (id, request) -> switch (request) {
            case Request.Register r -> List.of(new Out(id, self[0].registered(7, 1,
                    List.of(new Reply.ArenaFile(16L * SLOT, SLOT)))));
            case Request.Stats s -> List.of(new Out(id, new Reply.StatsReply(List.of(new Reply.Counter("query_hits", 3)))));
            default -> rest.answer(id, request);
        });
        self[0].arenas(arenaFd);
        return self[0];
    }

    OrbitKvClient connect(ScriptedManager m) throws IOException {
        OrbitKvClient c = OrbitKvClient.connect(m.socketPath, Duration.ofSeconds(10));
        c.register("engine-0", 1, NS, CONTRACT);
        return c;
    }

    static MemorySegment image(int length, int seed) {
        byte[] b = new byte[length];
        for (int i = 0; i < length; i++) b[i] = (byte) (seed + i * 31);
        return MemorySegment.ofArray(b);
    }

    static Reply.QueryResult hit(long op, int revision, QueryStatus status, Reply.Lease lease) {
        Reply.PageResult page = status == QueryStatus.FINAL ? new Reply.Resident(lease) : Reply.Unleased.RESERVED;
        return new Reply.QueryResult(op, revision, status, true, 16,
                List.of(new Reply.GroupResult(0, List.of(new Reply.Span(0, List.of(page))))));
    }

    static Request.Query query(long op, int revision, CompletionTarget target) {
        return new Request.Query(op, revision, target, 20, 0,
                List.of(new Request.QueryGroup(0, KeyForm.BLOCK_HASH, Hashes.of(List.of(new byte[] {1, 2, 3, 4})))));
    }

    @Test
    void publishWritesEachGrantedSlotThroughTheMappingAndCommitsOnlyThose() throws Exception {
        try (ScriptedManager m = manager((id, request) -> switch (request) {
            case Request.PublishReserve r -> List.of(new Out(id, new Reply.Reserved(List.of(
                    new Reply.Granted(11, 0, 2L * SLOT), new Reply.Refused(Refusal.ALREADY_RESIDENT),
                    new Reply.Granted(12, 0, 5L * SLOT)))));
            case Request.PublishCommit c -> List.of(new Out(id, new Reply.Committed(
                    List.of(SettleOutcome.SEALED, SettleOutcome.DISCARDED))));
            default -> throw new AssertionError(request);
        }); OrbitKvClient client = connect(m)) {
            List<PublishOutcome> outcomes = client.publish(List.of(
                    PageToPublish.ofBlockHash(0, new byte[] {1}, image(1000, 1)),
                    PageToPublish.ofBlockHash(0, new byte[] {2}, image(1000, 2)),
                    PageToPublish.ofBlockHash(0, new byte[] {3}, image(SLOT, 3))));

            assertThat(outcomes).containsExactly(PublishOutcome.SEALED, PublishOutcome.ALREADY_RESIDENT,
                    PublishOutcome.DISCARDED);
            byte[] file = Files.readAllBytes(arenaFile);
            assertThat(MemorySegment.ofArray(file).asSlice(2L * SLOT, 1000).mismatch(image(1000, 1))).isEqualTo(-1);
            assertThat(MemorySegment.ofArray(file).asSlice(5L * SLOT, SLOT).mismatch(image(SLOT, 3))).isEqualTo(-1);
            assertThat(file[2 * SLOT + 1000]).as("nothing past the page image").isZero();
            assertThat(m.received.get(2)).isEqualTo(new Request.PublishCommit(List.of(11L, 12L)));
        }
    }

    @Test
    void pendingQuerySettlesOnCompletionThenPollsAndReadsTheLeaseReadOnly() throws Exception {
        Reply.Lease lease = new Reply.Lease(0, 3L * SLOT, 600);
        MemorySegment.copy(image(600, 9), 0, mapFile(), 3L * SLOT, 600);
        try (ScriptedManager m = manager((id, request) -> switch (request) {
            case Request.Query q -> List.of(new Out(id, hit(q.operationId(), q.revision(), QueryStatus.PENDING, lease)),
                    new Out(0, new Reply.Completion(q.operationId(), q.revision(), CompletionEvent.QUERY_SETTLED,
                            Reply.Settled.OK)));
            case Request.QueryPoll p -> List.of(new Out(id, hit(p.operationId(), p.revision(), QueryStatus.FINAL, lease)));
            case Request.Release r -> List.of(new Out(id, new Reply.Released(r.operationId(), true, 1)));
            default -> throw new AssertionError(request);
        }); OrbitKvClient client = connect(m)) {
            Reply.QueryResult first = client.query(query(5, 1, CompletionTarget.HOST_READY));
            assertThat(first.status()).isEqualTo(QueryStatus.PENDING);

            Reply.QueryResult settled = client.awaitSettled(first);

            assertThat(settled.status()).isEqualTo(QueryStatus.FINAL);
            Reply.Lease got = ((Reply.Resident) settled.groups().getFirst().spans().getFirst().pages().getFirst()).lease();
            MemorySegment page = client.readLease(got);
            assertThat(page.mismatch(image(600, 9))).isEqualTo(-1);
            assertThat(page.isReadOnly()).isTrue();
            assertThatThrownBy(() -> page.set(ValueLayout.JAVA_BYTE, 0, (byte) 1)).isInstanceOf(IllegalArgumentException.class);
            assertThat(client.release(5).pagesReleased()).isEqualTo(1);
            assertThat(m.received.stream().map(Request::type).map(Enum::name))
                    .containsExactly("REGISTER", "QUERY", "QUERY_POLL", "RELEASE");
        }
    }

    @Test
    void restoreWaitsForRestoreDoneAndTheRegionHoldsWhatTheManagerCopied() throws Exception {
        Path regionFile = dir.resolve("region");
        Reply.Lease lease = new Reply.Lease(0, 0, 512);
        try (ScriptedManager m = manager((id, request) -> switch (request) {
            case Request.Query q -> List.of(new Out(id, hit(q.operationId(), q.revision(), QueryStatus.FINAL, lease)));
            case Request.RegisterRegion r -> List.of(new Out(id, new Reply.RegionRegistered(3)));
            case Request.Restore r -> {
                copyIntoRegion(regionFile, r.pages().getFirst().destinationPage() * 1024L, image(512, 4));
                yield List.of(new Out(id, new Reply.RestoreAccepted(r.operationId(), r.pages().size())),
                        new Out(0, new Reply.Completion(r.operationId(), 1, CompletionEvent.RESTORE_DONE, Reply.Settled.OK)));
            }
            default -> throw new AssertionError(request);
        }); OrbitKvClient client = connect(m)) {
            Region region = client.registerRegion(regionFile, 1024, 4);
            Reply.QueryResult result = client.query(query(8, 1, CompletionTarget.ENGINE_RESTORE));
            List<Request.RestorePage> plan = OrbitKvClient.residentPages(result, 2);

            Reply.Completion done = client.restore(8, region, plan);

            assertThat(plan).containsExactly(new Request.RestorePage(0, 0, 2));
            assertThat(done.event()).isEqualTo(CompletionEvent.RESTORE_DONE);
            assertThat(done.outcome()).isEqualTo(Reply.Settled.OK);
            assertThat(region.regionId()).isEqualTo(3);
            assertThat(region.page(2).asSlice(0, 512).mismatch(image(512, 4))).isEqualTo(-1);
            assertThat(m.received.get(1)).isEqualTo(new Request.RegisterRegion(regionFile.toString(), 4096, 1024, 4));
        }
    }

    @Test
    void releaseThatIsStillDrainingReturnsOnlyAfterDrained() throws Exception {
        try (ScriptedManager m = manager((id, request) -> switch (request) {
            case Request.Release r -> List.of(new Out(id, new Reply.Released(r.operationId(), false, 2)));
            case Request.Cancel c -> List.of(new Out(id, new Reply.Cancelled(c.operationId(), false, 0)),
                    new Out(0, new Reply.Completion(c.operationId(), 0, CompletionEvent.DRAINED, Reply.Settled.OK)));
            default -> throw new AssertionError(request);
        }); OrbitKvClient client = OrbitKvClient.connect(m.socketPath, Duration.ofMillis(300))) {
            client.register("engine-0", 1, NS, CONTRACT);
            assertThatThrownBy(() -> client.release(4)).as("no DRAINED ever comes")
                    .isInstanceOf(UncheckedIOException.class).hasMessageContaining("DRAINED");
            assertThat(client.cancel(6).operationId()).isEqualTo(6);
        }
    }

    @Test
    void anErrorReplyIsATypedExceptionAndTheConnectionGoesOn() throws Exception {
        try (ScriptedManager m = manager((id, request) -> List.of(new Out(id,
                new Reply.Error(ErrorCode.NOT_FOUND, "no such operation")))); OrbitKvClient client = connect(m)) {
            assertThatThrownBy(() -> client.poll(3, 1)).isInstanceOfSatisfying(OrbitKvException.class, e -> {
                assertThat(e.code()).isEqualTo(ErrorCode.NOT_FOUND);
                assertThat(e.detail()).isEqualTo("no such operation");
            });
            assertThat(client.stats()).containsEntry("query_hits", 3L);
        }
    }

    @Test
    void pipelinedRequestsAreMatchedToTheirRepliesById() throws Exception {
        try (ScriptedManager m = manager((id, request) -> switch (request) {
            case Request.QueryPoll p -> List.of(new Out(id, new Reply.QueryResult(p.operationId(), p.revision(),
                    QueryStatus.FINAL, false, 0, List.of())));
            default -> throw new AssertionError(request);
        }); OrbitKvClient client = connect(m)) {
            List<CompletableFuture<Reply.QueryResult>> inFlight = new ArrayList<>();
            for (int op = 1; op <= 200; op++) inFlight.add(client.send(new Request.QueryPoll(op, op % 7), Reply.QueryResult.class));
            for (int op = 1; op <= 200; op++) {
                Reply.QueryResult r = inFlight.get(op - 1).get();
                assertThat(r.operationId()).isEqualTo(op);
                assertThat(r.revision()).isEqualTo(op % 7);
            }
        }
    }

    @Test
    void anUnsolicitedStaleEpochFailsWhatIsPendingWithThatCode() throws Exception {
        try (ScriptedManager m = manager((id, request) -> List.of(new Out(0,
                new Reply.Error(ErrorCode.STALE_EPOCH, "instance registered epoch 2")))); OrbitKvClient client = connect(m)) {
            assertThatThrownBy(() -> client.poll(1, 0)).isInstanceOfSatisfying(OrbitKvException.class,
                    e -> assertThat(e.code()).isEqualTo(ErrorCode.STALE_EPOCH));
            assertThatThrownBy(client::stats).isInstanceOf(OrbitKvException.class);
        }
    }

    @Test
    void closeUnmapsTheArenas() throws Exception {
        MemorySegment page;
        try (ScriptedManager m = manager((id, request) -> List.of()); OrbitKvClient client = connect(m)) {
            page = client.readLease(new Reply.Lease(0, 0, 64));
            assertThat(page.get(ValueLayout.JAVA_BYTE, 0)).isZero();
            assertThatThrownBy(() -> client.readLease(new Reply.Lease(1, 0, 64))).isInstanceOf(IndexOutOfBoundsException.class);
        }
        assertThatThrownBy(() -> page.get(ValueLayout.JAVA_BYTE, 0)).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void anotherRegisterIsRefusedByTheManagerNotTheClient() throws Exception {
        try (ScriptedManager m = new ScriptedManager(dir, (id, request) -> List.of(new Out(id,
                new Reply.Error(ErrorCode.STALE_EPOCH, "epoch 1 < 2"))));
             OrbitKvClient client = OrbitKvClient.connect(m.socketPath)) {
            assertThatThrownBy(() -> client.register("engine-0", 1, NS, CONTRACT))
                    .isInstanceOfSatisfying(OrbitKvException.class, e -> assertThat(e.code()).isEqualTo(ErrorCode.STALE_EPOCH));
            assertThatThrownBy(client::registration).isInstanceOf(IllegalStateException.class);
        }
    }

    private MemorySegment mapFile() throws IOException {
        try (var ch = java.nio.channels.FileChannel.open(arenaFile, java.nio.file.StandardOpenOption.READ,
                java.nio.file.StandardOpenOption.WRITE)) {
            return ch.map(java.nio.channels.FileChannel.MapMode.READ_WRITE, 0, ch.size(), java.lang.foreign.Arena.ofAuto());
        }
    }

    private static void copyIntoRegion(Path file, long offset, MemorySegment bytes) throws IOException {
        try (RandomAccessFile f = new RandomAccessFile(file.toFile(), "rw")) {
            f.seek(offset);
            f.write(bytes.toArray(ValueLayout.JAVA_BYTE));
        }
    }
}
