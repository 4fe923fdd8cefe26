package io.orbitkv.server.channel;

import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.core.log.RateLimitedLog;
import io.orbitkv.core.fd.OwnerOnly;
import io.orbitkv.state.protocol.Direction;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.FrameDecoder;
import io.orbitkv.state.protocol.FrameEncoder;
import io.orbitkv.state.protocol.ProtocolLimits;
import io.orbitkv.state.protocol.Reply;
import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Level;
import java.util.logging.Logger;
import jdk.net.ExtendedSocketOptions;

/**
 * The Manager's engine-channel listener: a Unix domain stream socket (protocol §1) whose every
 * accepted connection runs on its own platform thread ({@link Connection}) against a
 * {@link io.orbitkv.core.engine.ChannelSession} from the {@link SessionFactory}.
 *
 * <p>Owns the listening socket, its socket file and the table of live connections. Thread model:
 * one accept virtual thread; one reader and one writer platform thread per connection;
 * {@link #close()} from any thread (the shutdown hook). Invariants: at most
 * {@code limits.maxConnections()} connections have sessions; one more gets no session: its first
 * frame is read whole and answered ERROR BUSY under that frame's request id, and it is closed
 * cleanly (protocol §8, §9.1; {@link FirstFrameRefusal}); only when
 * {@value AdmissionLimits#REFUSING_CONNECTIONS} such connections wait and none of them has been
 * silent for 1 s does a new one get ERROR BUSY under request id 0 at accept; the socket file exists exactly while the server is open
 * and has mode {@code 0600} or {@code 0660}; {@link #close()} returns only after every
 * session's {@code close()} ran (or the drain bound passed). At most
 * {@code maxUnregisteredConnections} of the live connections are not yet REGISTERED, at most
 * {@link AdmissionLimits#unregisteredPerUid} of them (24 of 32) of one peer uid ({@code SO_PEERCRED}),
 * so another uid always finds a place; a newcomer that finds no place displaces the oldest
 * unregistered connection that has sent nothing for 1 s ({@link UidPlaces}), else it is refused
 * BUSY like an over-limit one; and every connection not REGISTERED within
 * {@code registerTimeout} gets ERROR REGISTER_TIMEOUT and is closed; a REGISTERED session has no
 * idle timeout.
 *
 * <p>Socket file rules: an existing file at the path is probed with a connect. If a Manager
 * answers, {@link #start} refuses ({@link IOException}): a live socket is never replaced. If
 * nothing answers, the file is a stale leftover of a dead Manager and is replaced. Permissions
 * are set right after bind (Java cannot bind with a mode); for the microseconds between bind and
 * chmod the file has the umask's mode, so on a shared host the socket belongs in a directory
 * only its users can enter (a missing parent directory is created 0700).
 *
 * <p>Design note: thread per connection instead of a selector loop: a session's {@code handle}
 * may block (REGISTER waits for a fenced incarnation to drain), and 256 connections cost 512
 * threads rather than a dispatcher that must never block. Platform threads, not virtual ones: a
 * virtual thread parked in {@code read} is woken by the JDK's read poller, which then wakes a
 * carrier, two thread wake-ups where a platform thread blocked in {@code read} has one. On these
 * VMs that cost a request arriving after the connection was idle ~0.3 ms more (a UDS echo after a
 * 20-200 ms pause: 375-428 us on a virtual thread, 69-79 us on a platform thread), which is the
 * cadence engines query at: one QUERY per request, not a tight loop. The threads are bounded by
 * {@code maxConnections}. Over-limit connections are answered on their first frame, as the protocol
 * documents, each on a virtual thread with a 16-byte header buffer, 256 at once.
 *
 * <p>Design note on silent connections: without a deadline, {@code maxConnections} (256) peers
 * that connect and send nothing held every place forever and locked every engine out. The
 * deadline alone would still let them hold every place for 10 s at a time, so unregistered
 * connections also get only {@code maxUnregisteredConnections} places (32 of 256 by default): the
 * rest can only be held by sessions that registered. Even so, 40 silent connections reopened as
 * they timed out kept all 32 places and a newcomer failed 36 of 36 tries in 18 s: so one uid gets
 * three quarters of them, and a connection silent for 1 s yields its place to a newcomer (one of
 * another uid then registered in 3 ms, one of the flooding uid in about 1 s; docs/reliability.md).
 * Registered sessions are never closed for
 * being idle: an engine may go quiet for hours between requests, and what it holds is bounded by
 * its own tables. One platform thread fires the deadlines; a task per connection lives at most
 * {@code registerTimeout}, or until the connection ends.
 */
public final class ChannelServer implements AutoCloseable {

    private static final Logger LOG = Logger.getLogger(ChannelServer.class.getName());
    /** accept() failures repeat at the accept loop's rate (e.g. EMFILE): one line per 10 s. */
    private static final RateLimitedLog ACCEPT_FAILURES = RateLimitedLog.tenSeconds(ChannelServer.class.getName());

    /**
     * How a server listens.
     *
     * @param socketPath          the socket file
     * @param socketMode          {@code 0600} (owner only, the default) or {@code 0660} (owner and group)
     * @param limits              decoder budgets and {@code maxConnections}
     * @param outboundQueueFrames COMPLETION frames queued per connection
     * @param drainTimeout        how long {@link #close()} waits for sessions to close
     * @param registerTimeout     how long a connection may stay unregistered (no REGISTERED sent yet)
     *                            before it gets ERROR REGISTER_TIMEOUT and is closed
     * @param maxUnregisteredConnections connections with a session but not yet REGISTERED, at most;
     *                            one more is refused BUSY, so at least {@code maxConnections} minus
     *                            this many places are left for registered engines
     */
    public record Settings(Path socketPath, String socketMode, ProtocolLimits limits, int outboundQueueFrames,
                           Duration drainTimeout, Duration registerTimeout, int maxUnregisteredConnections) {

        /** Default registration deadline: a client sends REGISTER first, in microseconds; 10 s covers a stalled start. */
        public static final Duration DEFAULT_REGISTER_TIMEOUT = Duration.ofSeconds(10);

        public Settings {
            Objects.requireNonNull(socketPath, "socketPath");
            Objects.requireNonNull(limits, "limits");
            Objects.requireNonNull(drainTimeout, "drainTimeout");
            Objects.requireNonNull(registerTimeout, "registerTimeout");
            if (registerTimeout.isNegative() || registerTimeout.isZero()) {
                throw new IllegalArgumentException("registerTimeout must be positive: " + registerTimeout);
            }
            if (maxUnregisteredConnections < 1 || maxUnregisteredConnections > limits.maxConnections()) {
                throw new IllegalArgumentException("maxUnregisteredConnections must be in [1, maxConnections = "
                        + limits.maxConnections() + "]: " + maxUnregisteredConnections);
            }
            if (!socketMode.equals("0600") && !socketMode.equals("0660")) {
                throw new IllegalArgumentException("socketMode must be 0600 or 0660: " + socketMode);
            }
            if (outboundQueueFrames < 1) throw new IllegalArgumentException("outboundQueueFrames must be >= 1");
        }

        /** Settings with the default registration deadline and {@link #defaultMaxUnregistered} places. */
        public Settings(Path socketPath, String socketMode, ProtocolLimits limits, int outboundQueueFrames,
                        Duration drainTimeout) {
            this(socketPath, socketMode, limits, outboundQueueFrames, drainTimeout, DEFAULT_REGISTER_TIMEOUT,
                    defaultMaxUnregistered(limits.maxConnections()));
        }

        /**
         * An eighth of {@code maxConnections} (32 of 256), at least 1: engines register right after
         * connecting, so a handful of places absorbs a restart of every engine of a host at once,
         * and seven eighths stay for registered sessions however many silent connections arrive.
         */
        public static int defaultMaxUnregistered(int maxConnections) {
            return Math.max(1, maxConnections / 8);
        }
    }

    private final Settings settings;
    private final ServerSocketChannel server;
    private final SessionFactory sessions;
    private final FrameDecoder decoder;
    private final ChannelMetrics metrics;
    private final Map<Long, Connection> live = new ConcurrentHashMap<>();
    /** Connections without a place, answered BUSY on their first frame; at most {@link AdmissionLimits#REFUSING_CONNECTIONS}. */
    private final Map<Long, FirstFrameRefusal> refusing = new ConcurrentHashMap<>();
    /** The same connections in age order, so a newcomer can displace the oldest silent one. */
    private final UidPlaces<FirstFrameRefusal> refusingPlaces;
    private final Map<Long, Thread> readers = new ConcurrentHashMap<>();
    /** Connections with a session and no REGISTERED yet, by peer uid; at most {@code maxUnregisteredConnections}. */
    private final UidPlaces<Connection> unregistered;
    /** An unregistered connection silent this long may be displaced by a newcomer. */
    private final long silentGraceNanos;
    /** Fires each connection's registration deadline; one daemon thread, a task per open connection at most. */
    private final ScheduledThreadPoolExecutor deadlines;
    /** Pending deadline tasks by connection id, cancelled when the connection ends (or removed when they run). */
    private final Map<Long, ScheduledFuture<?>> deadlineTasks = new ConcurrentHashMap<>();
    private final AtomicLong nextId = new AtomicLong();
    private final Thread acceptor;
    private volatile boolean closing;

    private String busyMessage() {
        return "maxConnections (" + settings.limits().maxConnections() + ") reached";
    }

    private ChannelServer(Settings settings, ServerSocketChannel server, SessionFactory sessions, MeterRegistry registry,
                          Duration silentGrace) {
        this.settings = settings;
        this.server = server;
        this.sessions = sessions;
        this.decoder = new FrameDecoder(settings.limits(), Direction.TO_MANAGER);
        this.metrics = new ChannelMetrics(registry);
        this.silentGraceNanos = silentGrace.toNanos();
        this.unregistered = new UidPlaces<>(settings.maxUnregisteredConnections(),
                AdmissionLimits.unregisteredPerUid(settings.maxUnregisteredConnections()),
                c -> c.silentFor(silentGraceNanos, System.nanoTime()));
        this.refusingPlaces = new UidPlaces<>(AdmissionLimits.REFUSING_CONNECTIONS, AdmissionLimits.REFUSING_CONNECTIONS,
                r -> r.silentFor(silentGraceNanos, System.nanoTime()));
        Gauge.builder("orbitkv.channel.connections", live, Map::size).description("open engine connections").register(registry);
        this.acceptor = Thread.ofVirtual().name("orbitkv-channel-accept").unstarted(this::acceptLoop);
        this.deadlines = new ScheduledThreadPoolExecutor(1,
                Thread.ofPlatform().daemon().name("orbitkv-channel-deadlines").factory());
        this.deadlines.setRemoveOnCancelPolicy(true);
    }

    /**
     * Binds the socket (replacing a stale file, refusing a live one), sets its mode and starts
     * accepting.
     *
     * @throws IOException if the path is served by a live Manager or cannot be bound
     */
    public static ChannelServer start(Settings settings, SessionFactory sessions, MeterRegistry registry)
            throws IOException {
        return start(settings, sessions, registry, AdmissionLimits.silentGrace(settings.registerTimeout()));
    }

    /**
     * As {@link #start(Settings, SessionFactory, MeterRegistry)} with {@code silentGrace} instead of
     * {@link AdmissionLimits#silentGrace}: for a test whose connections must not be displaced
     * however long the machine takes to accept them.
     */
    static ChannelServer start(Settings settings, SessionFactory sessions, MeterRegistry registry, Duration silentGrace)
            throws IOException {
        Path path = settings.socketPath();
        Path parent = path.toAbsolutePath().getParent();
        if (parent != null && !Files.isDirectory(parent)) {
            OwnerOnly.createDirectories(parent);
        }
        removeIfStale(path);
        ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        try {
            server.bind(UnixDomainSocketAddress.of(path));
            Files.setPosixFilePermissions(path, PosixFilePermissions.fromString(
                    settings.socketMode().equals("0600") ? "rw-------" : "rw-rw----"));
        } catch (IOException | RuntimeException e) {
            server.close();
            throw e;
        }
        ChannelServer s = new ChannelServer(settings, server, sessions, registry, silentGrace);
        s.acceptor.start();
        return s;
    }

    /**
     * Deletes {@code path} if it is a socket nobody answers on; leaves it if a server answers.
     *
     * @throws IOException if a live server answers, or the path is not a socket
     */
    @SuppressWarnings("try") // the probe connection only tells whether a Manager listens
    public static void removeIfStale(Path path) throws IOException {
        if (!Files.exists(path, LinkOption.NOFOLLOW_LINKS)) return;
        int mode = (Integer) Files.getAttribute(path, "unix:mode", LinkOption.NOFOLLOW_LINKS);
        if ((mode & 0170000) != 0140000) {
            throw new IOException(path + " exists and is not a socket; refusing to replace it");
        }
        try (SocketChannel probe = SocketChannel.open(UnixDomainSocketAddress.of(path))) {
            throw new IOException("a Manager is already listening on " + path);
        } catch (java.net.ConnectException e) {
            LOG.info(() -> "replacing stale socket " + path + " (nothing listening)");
            Files.deleteIfExists(path);
        }
    }

    /** The socket file. */
    public Path socketPath() {
        return settings.socketPath();
    }

    /** Connections live now. */
    public int connections() {
        return live.size();
    }

    private void acceptLoop() {
        while (!closing) {
            SocketChannel channel;
            try {
                channel = server.accept();
            } catch (ClosedChannelException e) {
                return;
            } catch (IOException e) {
                if (closing) return;
                ACCEPT_FAILURES.log(System.Logger.Level.WARNING, "accept", "accepting an engine connection failed: " + e
                        + "; if the process is out of file descriptors, raise its limit (ulimit -n) or lower maxConnections");
                continue;
            }
            metrics.accepted.increment();
            if (closing) {
                metrics.refusedBusy.increment();
                refuse(channel, ErrorCode.SHUTTING_DOWN, "the Manager is shutting down");
                continue;
            }
            long id = nextId.incrementAndGet();
            if (live.size() >= settings.limits().maxConnections()) {
                metrics.refusedBusy.increment();
                refuseOnFirstFrame(id, channel, busyMessage());
                continue;
            }
            Connection c = new Connection(id, channel, decoder, settings.outboundQueueFrames(), metrics,
                    unregistered::leave, () -> {
                        live.remove(id);
                        readers.remove(id);
                        ScheduledFuture<?> deadline = deadlineTasks.remove(id);
                        if (deadline != null) deadline.cancel(false);
                    });
            // Placed here, on the only thread that adds, so the bounds hold exactly.
            switch (unregistered.admit(c, peerOf(channel))) {
                case UidPlaces.Admission.Refused<Connection> r -> {
                    (r.reason() == UidPlaces.Refusal.UID_FULL ? metrics.refusedUnregisteredPerUid
                            : metrics.refusedUnregistered).increment();
                    refuseOnFirstFrame(id, channel, waitingMessage(r.reason()));
                    continue;
                }
                case UidPlaces.Admission.Placed<Connection> p -> p.displaced().ifPresent(d -> {
                    metrics.displaced.increment();
                    d.displace(displacedMessage());
                });
            }
            Thread reader = Thread.ofPlatform().daemon().name("orbitkv-conn-" + id).unstarted(() -> c.run(sessions));
            live.put(id, c);
            readers.put(id, reader);
            reader.start();
            scheduleDeadline(id, () -> c.registerDeadlinePassed(
                    "not REGISTERED within the registration deadline (" + settings.registerTimeout().toMillis() + " ms)"),
                    settings.registerTimeout());
        }
    }

    /** The peer's user ({@code SO_PEERCRED}), the key of its share of the unregistered places. */
    private static Object peerOf(SocketChannel channel) {
        try {
            return channel.getOption(ExtendedSocketOptions.SO_PEERCRED).user();
        } catch (IOException | UnsupportedOperationException e) {
            return UNKNOWN_PEER;
        }
    }

    /** The share of connections whose peer the kernel did not name (not on Linux). */
    private static final Object UNKNOWN_PEER = "unknown peer";

    /**
     * A connection without a place: its first frame is answered BUSY on a virtual thread
     * ({@link FirstFrameRefusal}); past {@link AdmissionLimits#REFUSING_CONNECTIONS} such
     * connections at once it displaces the oldest that has sent nothing, and only when none is
     * silent is it answered BUSY under request id 0 at once.
     */
    private void refuseOnFirstFrame(long id, SocketChannel channel, String message) {
        FirstFrameRefusal r = new FirstFrameRefusal(id, channel, decoder, ErrorCode.BUSY, message, metrics);
        switch (refusingPlaces.admit(r, UNKNOWN_PEER)) {
            case UidPlaces.Admission.Refused<FirstFrameRefusal> full -> {
                refuse(channel, ErrorCode.BUSY, message);
                return;
            }
            case UidPlaces.Admission.Placed<FirstFrameRefusal> p -> p.displaced().ifPresent(d -> {
                metrics.displaced.increment();
                d.displace(displacedMessage());
            });
        }
        refusing.put(id, r);
        scheduleDeadline(id, r::deadlinePassed, settings.registerTimeout()); // before the thread, which cancels it
        Thread.ofVirtual().name("orbitkv-conn-" + id + "-refused").start(() -> {
            try {
                r.run();
            } finally {
                refusingPlaces.leave(r);
                refusing.remove(id);
                ScheduledFuture<?> deadline = deadlineTasks.remove(id);
                if (deadline != null) deadline.cancel(false);
            }
        });
    }

    private String displacedMessage() {
        return "displaced by a newer connection: not a byte sent for " + silentGraceNanos / 1_000_000
                + " ms; send REGISTER first";
    }

    private String waitingMessage(UidPlaces.Refusal reason) {
        return switch (reason) {
            case FULL -> "maxUnregisteredConnections (" + settings.maxUnregisteredConnections()
                    + ") connections are waiting to register";
            case UID_FULL -> "this user's share (" + AdmissionLimits.unregisteredPerUid(settings.maxUnregisteredConnections())
                    + ") of maxUnregisteredConnections is waiting to register";
        };
    }

    /** Runs {@code task} after {@code delay} unless the connection {@code id} ended first. */
    private void scheduleDeadline(long id, Runnable task, Duration delay) {
        try {
            // The scheduler thread only hands over: the task writes to the client's socket.
            deadlineTasks.put(id, deadlines.schedule(() -> {
                deadlineTasks.remove(id);
                Thread.ofVirtual().name("orbitkv-conn-" + id + "-deadline").start(task);
            }, delay.toNanos(), TimeUnit.NANOSECONDS));
        } catch (RejectedExecutionException e) {
            // Only after close(), which closes every connection itself.
        }
    }

    /** One ERROR frame under request id 0, then close; on the accept thread, before any buffer. */
    private void refuse(SocketChannel channel, ErrorCode code, String message) {
        try (channel) {
            ByteBuffer frame = ByteBuffer.wrap(FrameEncoder.toBytes(0, new Reply.Error(code, message)));
            while (frame.hasRemaining()) channel.write(frame);
        } catch (IOException e) {
            LOG.fine(() -> "refused connection: " + e);
        }
    }

    /**
     * Stops accepting, sends ERROR SHUTTING_DOWN to every connection and closes it, waits up to
     * the drain timeout for every session's {@code close()}, then removes the socket file.
     * Idempotent.
     */
    @Override
    public void close() {
        if (closing) return;
        closing = true;
        try {
            server.close();
        } catch (IOException e) {
            LOG.log(Level.WARNING, "closing the listening socket failed", e);
        }
        acceptor.interrupt();
        deadlines.shutdownNow();
        List<Connection> open = new ArrayList<>(live.values());
        for (Connection c : open) c.sendAndClose(ErrorCode.SHUTTING_DOWN, "the Manager is shutting down");
        for (FirstFrameRefusal r : List.copyOf(refusing.values())) r.shutDown();
        long deadline = System.nanoTime() + settings.drainTimeout().toNanos();
        for (Thread reader : new ArrayList<>(readers.values())) {
            long left = deadline - System.nanoTime();
            try {
                if (left <= 0 || !reader.join(Duration.ofNanos(left))) {
                    LOG.warning("a session did not close within " + settings.drainTimeout());
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        try {
            Files.deleteIfExists(settings.socketPath());
        } catch (IOException e) {
            LOG.log(Level.WARNING, "removing " + settings.socketPath() + " failed", e);
        }
        LOG.info(() -> "channel closed: " + open.size() + " connections closed");
    }
}
