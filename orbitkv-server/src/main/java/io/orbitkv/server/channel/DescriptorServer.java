package io.orbitkv.server.channel;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.core.engine.DescriptorHandoff;
import io.orbitkv.core.fd.OwnerOnly;
import io.orbitkv.core.fd.Posix;
import io.orbitkv.core.log.RateLimitedLog;
import io.orbitkv.state.protocol.DescriptorExchange;
import io.orbitkv.state.protocol.DescriptorTicket;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.unix.UnixSocket;
import java.io.IOException;
import java.nio.file.FileSystems;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.nio.file.attribute.UserPrincipal;
import java.nio.file.attribute.UserPrincipalLookupService;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.LongSupplier;

/**
 * The Manager's descriptor socket (protocol §6.11): a Unix stream socket next to the channel
 * socket ({@code <socket>.fd}) where a registered engine fetches its namespace's arena
 * descriptors with the one-time ticket of its REGISTERED, and where a client hands over a region
 * descriptor for REGISTER_REGION. Descriptors travel as {@code SCM_RIGHTS}; nothing an engine
 * receives names another namespace's memory, and no path to the Manager's descriptors exists.
 *
 * <p>Owns the listening socket and its file, the {@link DescriptorTable} (and every duplicate
 * descriptor in it), one accept thread and one platform thread per open connection.
 *
 * <p>Thread model: the accept platform thread reads each connection's peer uid ({@code
 * SO_PEERCRED}) and gives it a place in a {@link UidPlaces} ({@value AdmissionLimits#DESCRIPTOR_CONNECTIONS}
 * in all, {@value AdmissionLimits#DESCRIPTOR_CONNECTIONS_PER_UID} per uid) and its own thread; a
 * newcomer that finds no place displaces the oldest connection that has sent nothing yet (of its
 * own uid when its uid's share is taken), and is closed at once only when every place is held by
 * a connection that is reading or answering. A connection's request is read whole within
 * {@link AdmissionLimits#DESCRIPTOR_READ_DEADLINE} (1 s) and its reply sent within
 * {@code exchangeTimeout}, so a silent connection holds a place at most 1 s, and only until a
 * newcomer needs it. Sessions call {@link #offerArenas}, {@link #claimRegion} and {@link #release}
 * from their own threads.
 *
 * <p>Invariants: every request is answered, except one that sent nothing; a request shorter or
 * longer than 24 bytes is answered MALFORMED after it was read whole (up to
 * {@value AdmissionLimits#DESCRIPTOR_REQUEST_BOUND_BYTES} bytes), so the close that follows does
 * not reset the client before it reads the answer; a ticket is judged at the time its connection
 * was accepted, so reading it costs the ticket nothing.
 *
 * <p>Design note on floods: with 2 exchange threads, a queue of 64 and 2 s per blocking step, 100
 * connections that sent nothing held the socket for over 30 s, and a new engine's ticket (5 s)
 * expired in the queue. A thread per connection, a 1 s read deadline and displacement of the
 * oldest silent connection serve a newcomer within milliseconds under the same flood, whatever
 * uid floods (docs/reliability.md has the figures); the cost is a thread start per connection
 * (~50 us), against fetches that happen once per REGISTER.
 *
 * <p>Design note: a second socket instead of ancillary data on the channel: the channel is a
 * {@code SocketChannel} (a virtual thread per connection), which cannot carry {@code SCM_RIGHTS},
 * and reaching into {@code sun.nio.ch} for its descriptor would need {@code --add-opens} on every
 * launch. The exchange is rare (once per REGISTER, once per descriptor region) and tiny (24
 * bytes each way), so platform threads blocking in {@code recvmsg} cost nothing that matters, and
 * a blocking native call on a virtual thread would pin its carrier anyway. Tickets are bound to
 * the channel client's uid ({@code SO_PEERCRED} on both sockets); Java's {@code SO_PEERCRED} for
 * the channel reports no pid, so a ticket is not bound to a process: its secrecy (only the
 * registered connection reads it), single use and {@code ticketTtl} are what keep it to that
 * client.
 */
public final class DescriptorServer implements DescriptorHandoff, AutoCloseable {

    private static final System.Logger LOG = System.getLogger(DescriptorServer.class.getName());
    private static final RateLimitedLog FAILURES = RateLimitedLog.tenSeconds(DescriptorServer.class.getName());
    /** The listen backlog: connections the kernel holds before the accept thread takes them. */
    static final int BACKLOG = 64;
    /** Parked region descriptors at most: clients hand one over right before REGISTER_REGION. */
    static final int MAX_PARKED_REGIONS = 256;

    /**
     * How the descriptor socket runs.
     *
     * @param socketPath      the socket file; absolute, at most 107 bytes
     * @param socketMode      {@code 0600} or {@code 0660}, as the channel socket's
     * @param maxOffers       arena tickets live at once (one per registered session: {@code maxConnections})
     * @param ticketTtl       how long a ticket or handle stays redeemable
     * @param exchangeTimeout each receive and send of an exchange at most
     */
    public record Settings(Path socketPath, String socketMode, int maxOffers, Duration ticketTtl, Duration exchangeTimeout) {
        /** Default ticket lifetime: an engine fetches right after REGISTERED, in milliseconds. */
        public static final Duration DEFAULT_TICKET_TTL = Duration.ofSeconds(5);
        /** Default bound on each blocking call of an exchange. */
        public static final Duration DEFAULT_EXCHANGE_TIMEOUT = Duration.ofSeconds(2);

        public Settings {
            Objects.requireNonNull(socketPath, "socketPath");
            socketPath = socketPath.toAbsolutePath().normalize();
            if (socketPath.toString().getBytes(java.nio.charset.StandardCharsets.UTF_8).length
                    > Reply.Registered.MAX_SOCKET_PATH_BYTES) {
                throw new IllegalArgumentException("the descriptor socket path " + socketPath + " is longer than "
                        + Reply.Registered.MAX_SOCKET_PATH_BYTES + " bytes (sun_path); use a shorter --socket path");
            }
            if (!socketMode.equals("0600") && !socketMode.equals("0660")) {
                throw new IllegalArgumentException("socketMode must be 0600 or 0660: " + socketMode);
            }
            if (maxOffers < 1) throw new IllegalArgumentException("maxOffers must be >= 1: " + maxOffers);
            if (ticketTtl.isNegative() || ticketTtl.isZero() || exchangeTimeout.isNegative() || exchangeTimeout.isZero()) {
                throw new IllegalArgumentException("ticketTtl and exchangeTimeout must be positive");
            }
        }

        /** The descriptor socket that goes with the channel socket {@code channelSocket}: {@code <socket>.fd}. */
        public static Path besideChannel(Path channelSocket) {
            Path abs = channelSocket.toAbsolutePath().normalize();
            return abs.resolveSibling(abs.getFileName() + ".fd");
        }
    }

    private final Settings settings;
    private final int listenFd;
    private final DescriptorTable table;
    private final LongSupplier nanoClock;
    /** Open connections, each on its own thread; per uid and in all ({@link AdmissionLimits}). */
    private final UidPlaces<DescriptorConnection> places = new UidPlaces<>(AdmissionLimits.DESCRIPTOR_CONNECTIONS,
            AdmissionLimits.DESCRIPTOR_CONNECTIONS_PER_UID, e -> !e.heard);
    /** The exchange threads running, for {@link #close()} to wait on. */
    private final Map<DescriptorConnection, Thread> running = new ConcurrentHashMap<>();
    private final Thread acceptor;
    private final UserPrincipalLookupService users = FileSystems.getDefault().getUserPrincipalLookupService();
    private final Counter dropped;
    private final Map<DescriptorTable.Refusal, Counter> refusals = new EnumMap<>(DescriptorTable.Refusal.class);
    private final Counter malformed;
    private final Counter displaced;
    private final Counter refusedPerUid;
    private final Counter refusedFull;
    private volatile boolean closing;

    private DescriptorServer(Settings settings, int listenFd, MeterRegistry registry, LongSupplier nanoClock) {
        this.settings = settings;
        this.listenFd = listenFd;
        this.nanoClock = nanoClock;
        this.table = new DescriptorTable(settings.maxOffers(), MAX_PARKED_REGIONS, settings.ticketTtl().toNanos(),
                AdmissionLimits.DESCRIPTOR_READ_DEADLINE.toNanos(), Posix::close);
        Gauge.builder("orbitkv.manager.descriptor.tickets", this, s -> s.table.offers(s.nanoClock.getAsLong()))
                .description("arena tickets issued and not yet redeemed, expired or released").register(registry);
        Gauge.builder("orbitkv.manager.descriptor.regions", this, s -> s.table.regions(s.nanoClock.getAsLong()))
                .description("region descriptors handed over and not yet claimed or expired").register(registry);
        for (DescriptorTable.Refusal r : DescriptorTable.Refusal.values()) {
            refusals.put(r, Counter.builder("orbitkv.manager.descriptor.refusals").tag("reason", r.name().toLowerCase())
                    .description("descriptor socket tickets and handles refused").register(registry));
        }
        this.malformed = Counter.builder("orbitkv.manager.descriptor.refusals").tag("reason", "malformed")
                .description("descriptor socket tickets and handles refused").register(registry);
        this.dropped = Counter.builder("orbitkv.manager.descriptor.dropped.connections")
                .description("descriptor connections closed unanswered: no place, or a timeout").register(registry);
        this.displaced = Counter.builder("orbitkv.manager.descriptor.displaced.connections")
                .description("silent descriptor connections closed to give their place to a newer one").register(registry);
        this.refusedPerUid = Counter.builder("orbitkv.manager.descriptor.refused.connections").tag("reason", "per_uid")
                .description("descriptor connections closed at accept: no place, none silent to displace").register(registry);
        this.refusedFull = Counter.builder("orbitkv.manager.descriptor.refused.connections").tag("reason", "full")
                .description("descriptor connections closed at accept: no place, none silent to displace").register(registry);
        this.acceptor = Thread.ofPlatform().daemon().name("orbitkv-descriptors-accept").unstarted(this::acceptLoop);
    }

    /**
     * Binds the socket (replacing a stale file that nothing answers on), sets its mode and starts
     * accepting.
     *
     * @throws IOException if the path is served already, is not a socket, or cannot be bound
     */
    public static DescriptorServer start(Settings settings, MeterRegistry registry, LongSupplier nanoClock) throws IOException {
        if (!UnixSocket.supported()) throw new IOException("the descriptor socket needs Linux on x86_64 or aarch64");
        Path path = settings.socketPath();
        // it starts before the channel socket, beside it: the first start makes their directory
        Path parent = path.toAbsolutePath().getParent();
        if (parent != null && !Files.isDirectory(parent)) OwnerOnly.createDirectories(parent);
        removeIfStale(path);
        int fd = UnixSocket.open();
        if (fd < 0) throw new IOException("socket() failed: errno " + -fd);
        try {
            int r = UnixSocket.bind(fd, path.toString());
            if (r < 0) throw new IOException("binding the descriptor socket " + path + " failed: errno " + -r);
            Files.setPosixFilePermissions(path, PosixFilePermissions.fromString(
                    settings.socketMode().equals("0600") ? "rw-------" : "rw-rw----"));
            r = UnixSocket.listen(fd, BACKLOG);
            if (r < 0) throw new IOException("listen on " + path + " failed: errno " + -r);
        } catch (IOException | RuntimeException e) {
            UnixSocket.close(fd);
            Files.deleteIfExists(path);
            throw e;
        }
        DescriptorServer s = new DescriptorServer(settings, fd, registry, nanoClock);
        s.acceptor.start();
        return s;
    }

    private static void removeIfStale(Path path) throws IOException {
        if (!Files.exists(path, LinkOption.NOFOLLOW_LINKS)) return;
        int mode = (Integer) Files.getAttribute(path, "unix:mode", LinkOption.NOFOLLOW_LINKS);
        if ((mode & 0170000) != 0140000) throw new IOException(path + " exists and is not a socket; refusing to replace it");
        int probe = UnixSocket.open();
        if (probe < 0) throw new IOException("socket() failed: errno " + -probe);
        try {
            if (UnixSocket.connect(probe, path.toString()) == 0) {
                throw new IOException("a Manager is already serving descriptors on " + path);
            }
        } finally {
            UnixSocket.close(probe);
        }
        Files.deleteIfExists(path);
    }

    @Override
    public String socketPath() {
        return settings.socketPath().toString();
    }

    @Override
    public Optional<DescriptorTicket> offerArenas(Object owner, int[] fds, Optional<UserPrincipal> client) {
        int[] owned = new int[fds.length];
        for (int i = 0; i < fds.length; i++) {
            int dup = Posix.duplicate(fds[i]);
            if (dup < 0) {
                for (int j = 0; j < i; j++) Posix.close(owned[j]);
                throw new IllegalStateException("duplicating an arena descriptor failed: errno " + -dup
                        + "; if the process is out of file descriptors, raise its limit (ulimit -n)");
            }
            owned[i] = dup;
        }
        return table.offer(owner, owned, client.map(DescriptorTable.Credentials::new), nanoClock.getAsLong());
    }

    @Override
    public OptionalInt claimRegion(DescriptorTicket handle, Optional<UserPrincipal> client) {
        return switch (table.claim(handle, client.map(DescriptorTable.Credentials::new), nanoClock.getAsLong())) {
            case DescriptorTable.Redeemed.Granted(int[] fds) -> OptionalInt.of(fds[0]);
            case DescriptorTable.Redeemed.Refused(DescriptorTable.Refusal reason) -> {
                refusals.get(reason).increment();
                yield OptionalInt.empty();
            }
        };
    }

    @Override
    public void release(Object owner) {
        table.release(owner);
    }

    /** Arena tickets live now. */
    public int tickets() {
        return table.offers(nanoClock.getAsLong());
    }

    /** Region descriptors parked now. */
    public int parkedRegions() {
        return table.regions(nanoClock.getAsLong());
    }

    private void acceptLoop() {
        while (!closing) {
            int fd = UnixSocket.accept(listenFd);
            if (fd < 0) {
                if (closing) return;
                if (-fd == UnixSocket.EINTR) continue;
                FAILURES.log(System.Logger.Level.WARNING, "accept", "accepting a descriptor connection failed: errno " + -fd
                        + "; if the process is out of file descriptors, raise its limit (ulimit -n)");
                if (-fd == 9 /* EBADF */ || -fd == 22 /* EINVAL: shut down */) return;
                continue;
            }
            admit(new DescriptorConnection(fd, nanoClock.getAsLong()));
        }
    }

    /**
     * Gives {@code e} a place (displacing the oldest silent connection of the uid that holds too
     * many, {@link UidPlaces}) and its own thread, or closes it unanswered when every place is held
     * by a connection that is reading or answering (each bounded by the read and send deadlines).
     */
    private void admit(DescriptorConnection e) {
        int[] cred = new int[3];
        if (UnixSocket.peerCredentials(e.fd, cred) < 0) {
            dropped.increment();
            e.close();
            return;
        }
        e.uid = cred[1];
        switch (places.admit(e, e.uid)) {
            case UidPlaces.Admission.Refused<DescriptorConnection> r -> {
                dropped.increment();
                (r.reason() == UidPlaces.Refusal.UID_FULL ? refusedPerUid : refusedFull).increment();
                e.close();
            }
            case UidPlaces.Admission.Placed<DescriptorConnection> p -> {
                p.displaced().ifPresent(d -> {
                    displaced.increment();
                    d.displace();
                });
                try {
                    Thread t = Thread.ofPlatform().daemon().name("orbitkv-descriptors-" + e.fd).unstarted(() -> exchange(e));
                    running.put(e, t);
                    t.start();
                } catch (RuntimeException | OutOfMemoryError failed) {
                    running.remove(e);
                    places.leave(e);
                    dropped.increment();
                    e.close();
                    FAILURES.log(System.Logger.Level.WARNING, "thread", "no thread for a descriptor exchange: " + failed);
                }
            }
        }
    }

    /** One exchange on {@code e}: read the request whole, answer, close. */
    private void exchange(DescriptorConnection e) {
        List<Integer> received = new ArrayList<>(1);
        try {
            switch (e.readRequest(received)) {
                case DescriptorConnection.Request.Silent s -> {
                    if (s.timedOut()) dropped.increment();
                }
                case DescriptorConnection.Request.Partial p -> {
                    malformed.increment();
                    reply(e.fd, DescriptorExchange.errorReply(ErrorCode.MALFORMED), new int[0]);
                }
                case DescriptorConnection.Request.Whole w -> answer(e, w.bytes(), received);
            }
        } catch (RuntimeException ex) {
            FAILURES.log(System.Logger.Level.WARNING, "exchange", "a descriptor exchange failed: " + ex);
        } finally {
            places.leave(e);
            for (int r : received) Posix.close(r);
            e.close();
            running.remove(e);
        }
    }

    private void answer(DescriptorConnection e, byte[] request, List<Integer> received) {
        switch (DescriptorExchange.decodeRequest(request)) {
            case DescriptorExchange.DecodedRequest.Refused(ErrorCode code) -> {
                malformed.increment();
                reply(e.fd, DescriptorExchange.errorReply(code), new int[0]);
            }
            case DescriptorExchange.DecodedRequest.Ok(DescriptorExchange.ExchangeRequest r) -> {
                if (r.op() == DescriptorExchange.OP_ARENAS) {
                    arenas(e.fd, r.ticket().orElseThrow(), e.uid, e.acceptedAtNanos, received);
                } else {
                    region(e.fd, e.uid, received);
                }
            }
        }
    }

    private void arenas(int fd, DescriptorTicket ticket, int uid, long arrivedAtNanos, List<Integer> received) {
        if (!received.isEmpty()) {
            malformed.increment();
            reply(fd, DescriptorExchange.errorReply(ErrorCode.MALFORMED), new int[0]);
            return;
        }
        Optional<UserPrincipal> user = user(uid);
        if (user.isEmpty()) {
            refusals.get(DescriptorTable.Refusal.WRONG_PEER).increment();
            reply(fd, DescriptorExchange.errorReply(ErrorCode.TICKET_REFUSED), new int[0]);
            return;
        }
        switch (table.redeem(ticket, new DescriptorTable.Credentials(user.get()), arrivedAtNanos,
                nanoClock.getAsLong())) {
            case DescriptorTable.Redeemed.Refused(DescriptorTable.Refusal reason) -> {
                refusals.get(reason).increment();
                LOG.log(System.Logger.Level.DEBUG, () -> "descriptor ticket " + ticket + " refused: " + reason);
                reply(fd, DescriptorExchange.errorReply(ErrorCode.TICKET_REFUSED), new int[0]);
            }
            case DescriptorTable.Redeemed.Granted(int[] fds) -> {
                try {
                    reply(fd, DescriptorExchange.okReply(fds.length, Optional.empty()), fds);
                } finally {
                    for (int f : fds) Posix.close(f);
                }
            }
        }
    }

    private void region(int fd, int uid, List<Integer> received) {
        Optional<UserPrincipal> user = user(uid);
        if (received.size() != 1 || user.isEmpty()) {
            malformed.increment();
            reply(fd, DescriptorExchange.errorReply(ErrorCode.MALFORMED), new int[0]);
            return;
        }
        int region = received.removeFirst();
        Optional<DescriptorTicket> handle = table.park(region, new DescriptorTable.Credentials(user.get()),
                nanoClock.getAsLong());
        reply(fd, handle.isPresent() ? DescriptorExchange.okReply(0, handle)
                : DescriptorExchange.errorReply(ErrorCode.BUSY), new int[0]);
    }

    private Optional<UserPrincipal> user(int uid) {
        try {
            return Optional.of(users.lookupPrincipalByName(Integer.toString(uid)));
        } catch (IOException e) {
            return Optional.empty();
        }
    }

    private void reply(int fd, byte[] message, int[] fds) {
        long r = UnixSocket.setTimeouts(fd, settings.exchangeTimeout().toMillis());
        if (r == 0) r = UnixSocket.send(fd, message, fds);
        if (r < 0) dropped.increment();
    }

    /** Stops accepting, waits for running exchanges (each bounded), closes every held descriptor and removes the file. */
    @Override
    public void close() {
        if (closing) return;
        closing = true;
        UnixSocket.shutdown(listenFd);
        try {
            acceptor.join(settings.exchangeTimeout().toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        // Each exchange ends within its read deadline plus one bounded send.
        long deadline = System.nanoTime() + AdmissionLimits.DESCRIPTOR_READ_DEADLINE.toNanos()
                + settings.exchangeTimeout().toNanos();
        for (Thread t : List.copyOf(running.values())) {
            long left = deadline - System.nanoTime();
            try {
                if (left <= 0 || !t.join(Duration.ofNanos(left))) break;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        UnixSocket.close(listenFd);
        table.clear();
        try {
            Files.deleteIfExists(settings.socketPath());
        } catch (IOException e) {
            LOG.log(System.Logger.Level.WARNING, "removing " + settings.socketPath() + " failed: " + e);
        }
    }
}
