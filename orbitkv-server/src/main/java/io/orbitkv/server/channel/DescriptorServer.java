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
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;

/**
 * The Manager's descriptor socket (protocol §6.11): a Unix stream socket next to the channel
 * socket ({@code <socket>.fd}) where a registered engine fetches its namespace's arena
 * descriptors with the one-time ticket of its REGISTERED, and where a client hands over a region
 * descriptor for REGISTER_REGION. Descriptors travel as {@code SCM_RIGHTS}; nothing an engine
 * receives names another namespace's memory, and no path to the Manager's descriptors exists.
 *
 * <p>Owns the listening socket and its file, the {@link DescriptorTable} (and every duplicate
 * descriptor in it), one accept thread and a bounded pool of exchange threads.
 *
 * <p>Thread model: the accept platform thread hands each connection to one of
 * {@value #EXCHANGE_THREADS} platform threads (queue {@value #QUEUED_CONNECTIONS}; a connection
 * past that is closed at once and counted); an exchange is two blocking calls, each bounded by
 * {@code exchangeTimeout} ({@code SO_RCVTIMEO}/{@code SO_SNDTIMEO}), so a client that connects
 * and stalls holds a thread for at most that long and never the channel's threads. Sessions call
 * {@link #offerArenas}, {@link #claimRegion} and {@link #release} from their own threads.
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
    static final int EXCHANGE_THREADS = 2;
    static final int QUEUED_CONNECTIONS = 64;
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
    private final ThreadPoolExecutor exchanges;
    private final Thread acceptor;
    private final UserPrincipalLookupService users = FileSystems.getDefault().getUserPrincipalLookupService();
    private final Counter dropped;
    private final Map<DescriptorTable.Refusal, Counter> refusals = new EnumMap<>(DescriptorTable.Refusal.class);
    private final Counter malformed;
    private volatile boolean closing;

    private DescriptorServer(Settings settings, int listenFd, MeterRegistry registry, LongSupplier nanoClock) {
        this.settings = settings;
        this.listenFd = listenFd;
        this.nanoClock = nanoClock;
        this.table = new DescriptorTable(settings.maxOffers(), MAX_PARKED_REGIONS, settings.ticketTtl().toNanos(),
                Posix::close);
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
                .description("descriptor connections closed unanswered: exchange queue full, or a timeout").register(registry);
        this.exchanges = new ThreadPoolExecutor(EXCHANGE_THREADS, EXCHANGE_THREADS, 0, TimeUnit.MILLISECONDS,
                new ArrayBlockingQueue<>(QUEUED_CONNECTIONS), Thread.ofPlatform().daemon().name("orbitkv-descriptors-", 0).factory());
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
            r = UnixSocket.listen(fd, QUEUED_CONNECTIONS);
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
            try {
                exchanges.execute(() -> exchange(fd));
            } catch (RejectedExecutionException e) {
                dropped.increment();
                UnixSocket.close(fd);
            }
        }
    }

    /** One exchange on the accepted {@code fd}: read the request, answer, close. */
    private void exchange(int fd) {
        List<Integer> received = new ArrayList<>(1);
        try {
            if (UnixSocket.setTimeouts(fd, settings.exchangeTimeout().toMillis()) < 0) return;
            int[] cred = new int[3];
            if (UnixSocket.peerCredentials(fd, cred) < 0) return;
            byte[] request = new byte[DescriptorExchange.MESSAGE_BYTES];
            int have = 0;
            while (have < request.length) {
                long n = UnixSocket.receive(fd, request, have, request.length - have, 1, received);
                if (n == -UnixSocket.EMSGSIZE) {
                    reply(fd, DescriptorExchange.errorReply(ErrorCode.MALFORMED), new int[0]);
                    malformed.increment();
                    return;
                }
                if (n <= 0) {
                    if (n == -UnixSocket.EAGAIN) dropped.increment();
                    return; // end of stream or a timeout: nothing to answer
                }
                have += (int) n;
            }
            switch (DescriptorExchange.decodeRequest(request)) {
                case DescriptorExchange.DecodedRequest.Refused(ErrorCode code) -> {
                    malformed.increment();
                    reply(fd, DescriptorExchange.errorReply(code), new int[0]);
                }
                case DescriptorExchange.DecodedRequest.Ok(DescriptorExchange.ExchangeRequest r) -> {
                    if (r.op() == DescriptorExchange.OP_ARENAS) {
                        arenas(fd, r.ticket().orElseThrow(), cred[1], received);
                    } else {
                        region(fd, cred[1], received);
                    }
                }
            }
        } catch (RuntimeException e) {
            FAILURES.log(System.Logger.Level.WARNING, "exchange", "a descriptor exchange failed: " + e);
        } finally {
            for (int r : received) Posix.close(r);
            UnixSocket.close(fd);
        }
    }

    private void arenas(int fd, DescriptorTicket ticket, int uid, List<Integer> received) {
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
        switch (table.redeem(ticket, new DescriptorTable.Credentials(user.get()), nanoClock.getAsLong())) {
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
        long r = UnixSocket.send(fd, message, fds);
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
        exchanges.shutdown();
        try {
            exchanges.awaitTermination(2 * settings.exchangeTimeout().toMillis(), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
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
