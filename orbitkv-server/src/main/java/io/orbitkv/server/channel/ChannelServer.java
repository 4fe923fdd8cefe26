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
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The Manager's engine-channel listener: a Unix domain stream socket (protocol §1) whose every
 * accepted connection runs on its own platform thread ({@link Connection}) against a
 * {@link io.orbitkv.core.engine.ChannelSession} from the {@link SessionFactory}.
 *
 * <p>Owns the listening socket, its socket file and the table of live connections. Thread model:
 * one accept virtual thread; one reader and one writer platform thread per connection;
 * {@link #close()} from any thread (the shutdown hook). Invariants: at most
 * {@code limits.maxConnections()} connections have sessions; one more gets no session: its first
 * frame is answered ERROR BUSY under that frame's request id and it is closed (protocol §8), and
 * past {@link #REFUSING_CONNECTIONS} such connections waiting, a new one gets ERROR BUSY under
 * request id 0 at accept; the socket file exists exactly while the server is open
 * and has mode {@code 0600} or {@code 0660}; {@link #close()} returns only after every
 * session's {@code close()} ran (or the drain bound passed). At most
 * {@code maxUnregisteredConnections} of the live connections are not yet REGISTERED (one more is
 * refused BUSY like an over-limit one), and every connection not REGISTERED within
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
 * documents, but at most 16 at once (a 64 KiB buffer each); past that a connection flood costs
 * one small write per connection at accept and no memory.
 *
 * <p>Design note on silent connections: without a deadline, {@code maxConnections} (256) peers
 * that connect and send nothing held every place forever and locked every engine out. The
 * deadline alone would still let them hold every place for 10 s at a time, so unregistered
 * connections also get only {@code maxUnregisteredConnections} places (32 of 256 by default): the
 * rest can only be held by sessions that registered. Registered sessions are never closed for
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
    /** Over-limit connections waiting for their first frame to answer it BUSY; at most {@link #REFUSING_CONNECTIONS}. */
    private final Map<Long, Connection> refusing = new ConcurrentHashMap<>();
    private final Map<Long, Thread> readers = new ConcurrentHashMap<>();
    /** Connections with a session and no REGISTERED yet; at most {@code maxUnregisteredConnections}. */
    private final AtomicInteger unregistered = new AtomicInteger();
    /** Fires each connection's registration deadline; one daemon thread, a task per open connection at most. */
    private final ScheduledThreadPoolExecutor deadlines;
    /** Pending deadline tasks by connection id, cancelled when the connection ends (or removed when they run). */
    private final Map<Long, ScheduledFuture<?>> deadlineTasks = new ConcurrentHashMap<>();
    private final AtomicLong nextId = new AtomicLong();
    private final Thread acceptor;
    private volatile boolean closing;

    /**
     * Over-limit connections answered BUSY on their first frame at once; past this many (a
     * connection flood) a new one gets ERROR BUSY under request id 0 at accept and is closed.
     */
    static final int REFUSING_CONNECTIONS = 16;

    private String busyMessage() {
        return "maxConnections (" + settings.limits().maxConnections() + ") reached";
    }

    private ChannelServer(Settings settings, ServerSocketChannel server, SessionFactory sessions, MeterRegistry registry) {
        this.settings = settings;
        this.server = server;
        this.sessions = sessions;
        this.decoder = new FrameDecoder(settings.limits(), Direction.TO_MANAGER);
        this.metrics = new ChannelMetrics(registry);
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
        ChannelServer s = new ChannelServer(settings, server, sessions, registry);
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
                refuse(channel, ErrorCode.SHUTTING_DOWN, "the Manager is shutting down");
                continue;
            }
            long id = nextId.incrementAndGet();
            boolean full = live.size() >= settings.limits().maxConnections();
            // Counted here, on the only thread that adds, so the bound holds exactly.
            boolean waiting = !full && unregistered.get() >= settings.maxUnregisteredConnections();
            String busy = waiting ? waitingMessage() : busyMessage();
            if ((full || waiting) && refusing.size() >= REFUSING_CONNECTIONS) {
                refuse(channel, ErrorCode.BUSY, busy);
                continue;
            }
            boolean refused = full || waiting;
            Map<Long, Connection> table = refused ? refusing : live;
            if (!refused) unregistered.incrementAndGet();
            Connection c = new Connection(id, channel, decoder, settings.outboundQueueFrames(), metrics,
                    refused ? () -> { } : unregistered::decrementAndGet, () -> {
                        table.remove(id);
                        readers.remove(id);
                        ScheduledFuture<?> deadline = deadlineTasks.remove(id);
                        if (deadline != null) deadline.cancel(false);
                    });
            Thread reader = Thread.ofPlatform().daemon().name("orbitkv-conn-" + id).unstarted(refused
                    ? () -> c.runRefused(ErrorCode.BUSY, busy)
                    : () -> c.run(sessions));
            if (full) metrics.refusedBusy.increment();
            if (waiting) metrics.refusedUnregistered.increment();
            table.put(id, c);
            readers.put(id, reader);
            reader.start();
            scheduleDeadline(c);
        }
    }

    private String waitingMessage() {
        return "maxUnregisteredConnections (" + settings.maxUnregisteredConnections()
                + ") connections are waiting to register";
    }

    private void scheduleDeadline(Connection c) {
        long millis = settings.registerTimeout().toMillis();
        String message = "not REGISTERED within the registration deadline (" + millis + " ms)";
        try {
            // The scheduler thread only hands over: the close writes to the client's socket.
            deadlineTasks.put(c.id(), deadlines.schedule(() -> {
                deadlineTasks.remove(c.id());
                Thread.ofVirtual().name("orbitkv-conn-" + c.id() + "-deadline")
                        .start(() -> c.registerDeadlinePassed(message));
            }, settings.registerTimeout().toNanos(), TimeUnit.NANOSECONDS));
        } catch (RejectedExecutionException e) {
            // Only after close(), which closes every connection itself.
        }
    }

    /** One ERROR frame under request id 0, then close; on the accept thread, before any buffer. */
    private void refuse(SocketChannel channel, ErrorCode code, String message) {
        metrics.refusedBusy.increment();
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
        open.addAll(refusing.values());
        for (Connection c : open) c.sendAndClose(ErrorCode.SHUTTING_DOWN, "the Manager is shutting down");
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
