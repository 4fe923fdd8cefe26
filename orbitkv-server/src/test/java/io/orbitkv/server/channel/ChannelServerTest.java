package io.orbitkv.server.channel;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.engine.ChannelSession;
import io.orbitkv.core.engine.EventSink;
import io.orbitkv.core.engine.OpenResult;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.FrameEncoder;
import io.orbitkv.state.protocol.ProtocolLimits;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ServerSocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The transport against a scripted {@link ChannelSession}: framing, replies under the request's
 * id, every decoder refusal and whether it closes, COMPLETION ordering, INTERNAL on a session
 * bug, fencing, the connection bound, the socket file rules and session release on close.
 */
class ChannelServerTest {

    @TempDir
    Path dir;

    private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
    private final List<ScriptedSession> sessions = new CopyOnWriteArrayList<>();
    private ChannelServer server;

    /** STATS → a counter; CANCEL → queues a COMPLETION first, then replies; QUERY_POLL op 99 throws; RELEASE fences. */
    private final class ScriptedSession implements ChannelSession {
        final EventSink sink;
        final AtomicInteger closes = new AtomicInteger();
        final AtomicInteger handled = new AtomicInteger();

        ScriptedSession(EventSink sink) {
            this.sink = sink;
            sessions.add(this);
        }

        @Override
        public Reply handle(Request request) {
            handled.incrementAndGet();
            return switch (request) {
                case Request.Register r -> new Reply.Registered(1, r.epoch(), ProtocolLimits.DEFAULTS,
                        io.orbitkv.state.protocol.DescriptorTicket.random(), "/in-process",
                        List.of(new Reply.ArenaFile(1 << 20, 1 << 16)));
                case Request.Stats s -> new Reply.StatsReply(List.of(new Reply.Counter("handled", handled.get())));
                case Request.Cancel c -> {
                    boolean queued = sink.complete(new Reply.Completion(c.operationId(), 1, CompletionEvent.DRAINED,
                            Reply.Settled.OK));
                    assertThat(queued).isTrue();
                    yield new Reply.Cancelled(c.operationId(), false, 2);
                }
                case Request.QueryPoll p when p.operationId() == 99 -> throw new IllegalStateException("session bug");
                case Request.Release r -> {
                    sink.fence(ErrorCode.STALE_EPOCH, "fenced by a higher epoch");
                    yield new Reply.Released(r.operationId(), true, 0);
                }
                default -> new Reply.Error(ErrorCode.OUT_OF_ORDER, "not scripted");
            };
        }

        @Override
        public void close() {
            closes.incrementAndGet();
        }
    }

    private ChannelServer start(int maxConnections) throws IOException {
        // Scripted sessions mostly never register: every connection may wait, for longer than a test runs.
        return start(maxConnections, Duration.ofSeconds(60), maxConnections);
    }

    private ChannelServer start(int maxConnections, Duration registerTimeout, int maxUnregistered) throws IOException {
        return start(maxConnections, registerTimeout, maxUnregistered, AdmissionLimits.silentGrace(registerTimeout));
    }

    private ChannelServer start(int maxConnections, Duration registerTimeout, int maxUnregistered, Duration silentGrace)
            throws IOException {
        server = ChannelServer.start(new ChannelServer.Settings(dir.resolve("m.sock"), "0600",
                Newcomer.limitsWithMaxConnections(maxConnections), 4,
                Duration.ofSeconds(10), registerTimeout, maxUnregistered),
                (sink, peer) -> new OpenResult.Opened(new ScriptedSession(sink)), registry, silentGrace);
        return server;
    }

    @AfterEach
    void stop() {
        if (server != null) server.close();
    }

    private static byte[] stats(long requestId) {
        return FrameEncoder.toBytes(requestId, new Request.Stats());
    }

    private static byte[] withShort(byte[] frame, int offset, int value) {
        byte[] copy = frame.clone();
        ByteBuffer.wrap(copy).order(ByteOrder.LITTLE_ENDIAN).putShort(offset, (short) value);
        return copy;
    }

    private static RawClient.Frame frame(RawClient.Received r) {
        assertThat(r).isInstanceOf(RawClient.Frame.class);
        return (RawClient.Frame) r;
    }

    private static void assertError(RawClient.Received r, long requestId, ErrorCode code) {
        RawClient.Frame f = frame(r);
        assertThat(f.requestId()).isEqualTo(requestId);
        assertThat(f.reply()).isInstanceOfSatisfying(Reply.Error.class, e -> assertThat(e.code()).isEqualTo(code));
    }

    /**
     * The session factory learns who connected from the kernel ({@code SO_PEERCRED}): here this
     * process's own user, the owner of the files it creates. REGISTER_REGION holds a client to
     * files of that user.
     */
    @Test
    void theSessionIsOpenedWithThePeersUserFromTheKernel() throws Exception {
        java.util.concurrent.CompletableFuture<java.util.Optional<java.nio.file.attribute.UserPrincipal>> seen =
                new java.util.concurrent.CompletableFuture<>();
        server = ChannelServer.start(new ChannelServer.Settings(dir.resolve("p.sock"), "0600", ProtocolLimits.DEFAULTS, 4,
                Duration.ofSeconds(10)), (sink, peer) -> {
                    seen.complete(peer);
                    return new OpenResult.Opened(new ScriptedSession(sink));
                }, registry);
        try (RawClient c = new RawClient(dir.resolve("p.sock"))) {
            c.send(stats(1));
            java.nio.file.attribute.UserPrincipal owner = java.nio.file.Files.getOwner(
                    java.nio.file.Files.writeString(dir.resolve("mine"), "x"));
            assertThat(seen.get(10, java.util.concurrent.TimeUnit.SECONDS)).contains(owner);
        }
    }

    @Test
    void repliesCarryTheRequestIdInOrderAndTheSocketIsOwnerOnly() throws IOException {
        start(8);
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(dir.resolve("m.sock"))))
                .isEqualTo("rw-------");
        try (RawClient c = new RawClient(server.socketPath())) {
            c.send(stats(41));
            c.send(stats(42));
            RawClient.Frame first = frame(c.next());
            RawClient.Frame second = frame(c.next());
            assertThat(first.requestId()).isEqualTo(41);
            assertThat(second.requestId()).isEqualTo(42);
            assertThat(second.reply()).isEqualTo(new Reply.StatsReply(List.of(new Reply.Counter("handled", 2))));
        }
    }

    @Test
    void skippableRefusalsAnswerErrorUnderTheRequestIdAndTheStreamGoesOn() throws IOException {
        start(8);
        byte[] trailing = new byte[20];
        System.arraycopy(stats(7), 0, trailing, 0, 16);
        ByteBuffer.wrap(trailing).order(ByteOrder.LITTLE_ENDIAN).putInt(0, 20);
        try (RawClient c = new RawClient(server.socketPath())) {
            c.send(withShort(stats(5), 6, 0x0077));           // unknown type
            assertError(c.next(), 5, ErrorCode.UNKNOWN_OPERATION);
            c.send(withShort(stats(6), 6, 0x8001));           // a Manager-only type
            assertError(c.next(), 6, ErrorCode.UNKNOWN_OPERATION);
            c.send(trailing);                                  // trailing bytes
            assertError(c.next(), 7, ErrorCode.MALFORMED);
            byte[] idZero = stats(9);
            ByteBuffer.wrap(idZero).order(ByteOrder.LITTLE_ENDIAN).putLong(8, 0);
            c.send(idZero);                                    // request id 0 on a request
            assertError(c.next(), 0, ErrorCode.MALFORMED);
            c.send(stats(8));
            assertThat(frame(c.next()).reply()).isInstanceOf(Reply.StatsReply.class);
        }
        assertThat(registry.counter("orbitkv.channel.refused.frames", "code", "UNKNOWN_OPERATION").count()).isEqualTo(2);
    }

    @Test
    void unskippableRefusalsAnswerUnderIdZeroAndClose() throws IOException {
        start(8);
        try (RawClient c = new RawClient(server.socketPath())) {
            c.send(new byte[] {8, 0, 0, 0, 1, 0, 11, 0});      // length below the header
            assertError(c.next(), 0, ErrorCode.MALFORMED);
            assertThat(c.next()).isInstanceOf(RawClient.Closed.class);
        }
        try (RawClient c = new RawClient(server.socketPath())) {
            c.send(new byte[] {(byte) 0xff, (byte) 0xff, (byte) 0xff, 0x7f}); // 2 GiB declared: refused from 4 bytes
            assertError(c.next(), 0, ErrorCode.TOO_LARGE);
            assertThat(c.next()).isInstanceOf(RawClient.Closed.class);
        }
        try (RawClient c = new RawClient(server.socketPath())) {
            c.send(withShort(stats(3), 4, 1));                 // version 1 (paths for arenas): refused and closed
            assertError(c.next(), 3, ErrorCode.UNSUPPORTED_VERSION);
            assertThat(c.next()).isInstanceOf(RawClient.Closed.class);
        }
        await().atMost(Duration.ofSeconds(10)).until(() -> sessions.stream().allMatch(s -> s.closes.get() == 1)
                && server.connections() == 0);
        assertThat(sessions).hasSize(3);
    }

    @Test
    void aTruncatedFrameThenCloseReleasesTheSessionOnce() throws IOException {
        start(8);
        try (RawClient c = new RawClient(server.socketPath())) {
            c.send(java.util.Arrays.copyOf(stats(1), 10));
        }
        await().atMost(Duration.ofSeconds(10)).until(() -> sessions.size() == 1 && sessions.getFirst().closes.get() == 1);
        assertThat(sessions.getFirst().handled.get()).isZero();
        assertThat(registry.counter("orbitkv.channel.truncated.frames").count()).isEqualTo(1);
    }

    @Test
    void aCompletionQueuedDuringHandleFollowsItsReply() throws IOException {
        start(8);
        try (RawClient c = new RawClient(server.socketPath())) {
            for (int i = 1; i <= 50; i++) {
                c.send(FrameEncoder.toBytes(i, new Request.Cancel(i)));
                RawClient.Frame reply = frame(c.next());
                assertThat(reply.requestId()).isEqualTo(i);
                assertThat(reply.reply()).isInstanceOf(Reply.Cancelled.class);
                RawClient.Frame event = frame(c.next());
                assertThat(event.requestId()).isZero();
                assertThat(event.reply()).isEqualTo(new Reply.Completion(i, 1, CompletionEvent.DRAINED, Reply.Settled.OK));
            }
        }
        // each reply and its event leave in one gathering write, counted as two frames (after the
        // write returns, so the last count may land just after the client has read the frames)
        await().atMost(Duration.ofSeconds(10)).untilAsserted(
                () -> assertThat(registry.counter("orbitkv.channel.frames.out").count()).isEqualTo(100));
    }

    @Test
    void aSessionBugIsInternalAndTheConnectionStays() throws IOException {
        start(8);
        try (RawClient c = new RawClient(server.socketPath())) {
            long id = c.send(new Request.QueryPoll(99, 1));
            assertError(c.next(), id, ErrorCode.INTERNAL);
            assertThat(c.call(new Request.Stats())).isInstanceOf(Reply.StatsReply.class);
        }
        assertThat(registry.counter("orbitkv.channel.internal.errors").count()).isEqualTo(1);
    }

    @Test
    void fencingSendsTheErrorAndClosesTheConnection() throws IOException {
        start(8);
        try (RawClient c = new RawClient(server.socketPath())) {
            c.send(new Request.Release(3));
            RawClient.Received first = c.next();
            RawClient.Received second = c.next();
            // the reply and the fence race; the fence comes with request id 0 and ends the stream
            List<RawClient.Received> got = List.of(first, second);
            assertThat(got).anySatisfy(r -> assertError(r, 0, ErrorCode.STALE_EPOCH));
            assertThat(second instanceof RawClient.Closed || c.next() instanceof RawClient.Closed).isTrue();
        }
        await().atMost(Duration.ofSeconds(10)).until(() -> sessions.getFirst().closes.get() == 1);
    }

    @Test
    void connectionsOverTheBoundAreRefusedBusyAndTheOthersKeepWorking() throws IOException {
        start(2);
        try (RawClient a = new RawClient(server.socketPath()); RawClient b = new RawClient(server.socketPath())) {
            assertThat(a.call(new Request.Stats())).isInstanceOf(Reply.StatsReply.class);
            assertThat(b.call(new Request.Stats())).isInstanceOf(Reply.StatsReply.class);
            try (RawClient c = new RawClient(server.socketPath())) {
                long id = c.send(new Request.Stats());          // stands for REGISTER: answered BUSY, then closed
                assertError(c.next(), id, ErrorCode.BUSY);
                assertThat(c.next()).isInstanceOf(RawClient.Closed.class);
            }
            assertThat(a.call(new Request.Stats())).isInstanceOf(Reply.StatsReply.class);
        }
        await().atMost(Duration.ofSeconds(10)).until(() -> server.connections() == 0);
        try (RawClient c = new RawClient(server.socketPath())) {
            assertThat(c.call(new Request.Stats())).isInstanceOf(Reply.StatsReply.class);
        }
    }

    private static Request.Register register(String instance) {
        Namespace ns = new Namespace("m", "r1", "w", "t", "", "bf16", "nhd", 16, 1, 0, 1, 0, 1);
        return new Request.Register(instance, 1, ns, new RecoveryContract(16, List.of(new StateGroup.Full(0))));
    }

    @Test
    void silentConnectionsHoldOnlyTheUnregisteredPlacesAndAreClosedAtTheRegistrationDeadline() throws IOException {
        int maxConnections = 4;
        int maxUnregistered = 2;
        // Long enough that the checks before it cannot race it on a loaded machine; the test waits it out once.
        // No silent connection is displaced before it (the 1 s grace is raced by a stalled accept loop under
        // load; displacement has tests of its own).
        Duration registerTimeout = Duration.ofSeconds(3);
        start(maxConnections, registerTimeout, maxUnregistered, registerTimeout.multipliedBy(10));
        try (RawClient engineA = new RawClient(server.socketPath())) {
            assertThat(engineA.call(register("a"))).isInstanceOf(Reply.Registered.class);
            List<RawClient> silent = new java.util.ArrayList<>();
            try {
                for (int i = 0; i < maxConnections; i++) silent.add(new RawClient(server.socketPath()));
                // Connected right behind the silent ones (accepted after them, in order), so that it meets
                // them before any has been silent long enough to be displaced, however slow the checks below.
                try (RawClient early = new RawClient(server.socketPath())) {
                    // Two hold the unregistered places (a and at most one more engine could still register),
                    // the others and early wait to be refused; none takes a place a registered session could use.
                    await().atMost(Duration.ofSeconds(10)).until(() -> registry.get("orbitkv.channel.connections.refused")
                            .tag("reason", "max_unregistered").counter().count() == maxConnections - maxUnregistered + 1);
                    assertThat(server.connections()).isEqualTo(1 + maxUnregistered);
                    long id = early.send(register("early"));
                    assertError(early.next(), id, ErrorCode.BUSY);
                    assertThat(early.next()).isInstanceOf(RawClient.Closed.class);
                }
                for (RawClient c : silent) {
                    assertError(c.next(), 0, ErrorCode.REGISTER_TIMEOUT);
                    assertThat(c.next()).isInstanceOf(RawClient.Closed.class);
                }
            } finally {
                for (RawClient c : silent) c.close();
            }
            assertThat(registry.get("orbitkv.channel.register.timeouts").counter().count()).isEqualTo(maxConnections);
            await().atMost(Duration.ofSeconds(10)).until(() -> server.connections() == 1);
            try (RawClient engineB = new RawClient(server.socketPath())) {
                assertThat(engineB.call(register("b"))).as("an engine registers once the silent ones are gone")
                        .isInstanceOf(Reply.Registered.class);
                assertThat(engineA.call(new Request.Stats())).as("a registered session has no idle timeout")
                        .isInstanceOf(Reply.StatsReply.class);
            }
        }
    }

    @Test
    void anUnregisteredClientThatDoesNotReadItsRepliesIsStillClosedAtTheDeadline() throws Exception {
        start(4, Duration.ofMillis(500), 2);
        try (RawClient c = new RawClient(server.socketPath())) {
            // Requests whose replies are never read: once the socket buffers are full, the server's
            // write of a reply blocks while holding the connection's write lock.
            Thread flood = Thread.ofVirtual().start(() -> {
                try {
                    for (long id = 1; ; id++) c.send(stats(id));
                } catch (java.io.UncheckedIOException closed) {
                    // the server closed the connection: what the test waits for
                }
            });
            await().atMost(Duration.ofSeconds(10))
                    .until(() -> registry.get("orbitkv.channel.register.timeouts").counter().count() == 1);
            await().atMost(Duration.ofSeconds(10)).until(() -> server.connections() == 0);
            assertThat(flood.join(Duration.ofSeconds(10))).as("the flooding client sees the close").isTrue();
        }
        try (RawClient engine = new RawClient(server.socketPath())) {
            assertThat(engine.call(register("e"))).isInstanceOf(Reply.Registered.class);
        }
    }

    @Test
    void closeSendsShuttingDownClosesEverySessionAndRemovesTheSocket() throws IOException {
        start(8);
        try (RawClient a = new RawClient(server.socketPath()); RawClient b = new RawClient(server.socketPath())) {
            a.call(new Request.Stats());
            b.call(new Request.Stats());
            server.close();
            assertError(a.next(), 0, ErrorCode.SHUTTING_DOWN);
            assertThat(a.next()).isInstanceOf(RawClient.Closed.class);
        }
        assertThat(sessions).hasSize(2).allSatisfy(s -> assertThat(s.closes.get()).isEqualTo(1));
        assertThat(dir.resolve("m.sock")).doesNotExist();
    }

    @Test
    void aStaleSocketFileIsReplacedAndALiveOneIsNot() throws IOException {
        Path path = dir.resolve("m.sock");
        try (ServerSocketChannel dead = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
            dead.bind(UnixDomainSocketAddress.of(path));
        }
        assertThat(path).exists();                             // a dead Manager's leftover
        start(8);
        try (RawClient c = new RawClient(path)) {
            assertThat(c.call(new Request.Stats())).isInstanceOf(Reply.StatsReply.class);
        }
        assertThatThrownBy(() -> ChannelServer.start(new ChannelServer.Settings(path, "0660", ProtocolLimits.DEFAULTS,
                4, Duration.ofSeconds(1)), (sink, peer) -> new OpenResult.Opened(new ScriptedSession(sink)),
                new SimpleMeterRegistry()))
                .isInstanceOf(IOException.class).hasMessageContaining("already listening");
        try (RawClient c = new RawClient(path)) {
            assertThat(c.call(new Request.Stats())).isInstanceOf(Reply.StatsReply.class);
        }
        Path regular = Files.writeString(dir.resolve("not-a-socket"), "x");
        assertThatThrownBy(() -> ChannelServer.removeIfStale(regular)).hasMessageContaining("not a socket");
        assertThat(regular).exists();
    }

    @Test
    void aSessionRefusedByTheManagerIsAnsweredOnItsFirstFrameAndClosed() throws IOException {
        server = ChannelServer.start(new ChannelServer.Settings(dir.resolve("m.sock"), "0660", ProtocolLimits.DEFAULTS,
                4, Duration.ofSeconds(10)), (sink, peer) -> new OpenResult.Refused(ErrorCode.SHUTTING_DOWN, "draining"), registry);
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(dir.resolve("m.sock"))))
                .isEqualTo("rw-rw----");
        try (RawClient c = new RawClient(server.socketPath())) {
            long id = c.send(new Request.Stats());
            assertError(c.next(), id, ErrorCode.SHUTTING_DOWN);
            assertThat(c.next()).isInstanceOf(RawClient.Closed.class);
        }
        await().atMost(Duration.ofSeconds(10)).until(() -> server.connections() == 0);
    }
}
