package io.orbitkv.server.peer.bulk;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.orbitkv.core.peer.AuthorizeResult;
import io.orbitkv.core.peer.AuthorizeResult.Rejection;
import io.orbitkv.core.log.UnexpectedErrors;
import io.orbitkv.core.peer.NodeIncarnation;
import io.orbitkv.core.peer.PeerBoundary;
import io.orbitkv.core.peer.PeerSource;
import io.orbitkv.core.peer.SentChecksums;
import io.orbitkv.core.peer.TicketTable;
import io.orbitkv.server.cluster.ClusterSecurity;

import javax.net.ssl.SSLContext;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The source side of the bulk data plane: a TCP listener whose connections, once authenticated
 * ({@link BulkAuth}, over TLS when the cluster uses it), each carry BATCH_REQUESTs; for each, the
 * pages are authorized and pinned by {@link PeerSource#authorize} (at most
 * {@link #AUTHORIZE_AHEAD} ahead of the page being sent), then streamed in index order as PAGE
 * frames written straight from the pinned slot, or answered PAGE_REFUSED.
 *
 * <p>Owns the listening socket, its connections and their threads, the send-queue budget and the
 * {@link PageWriter} (with the checksums it remembers).
 * Borrows the {@link PeerSource} (tickets and pins stay its own). Thread model: one platform
 * acceptor thread ({@code orbitkv-bulk-accept}) and one platform thread per connection
 * ({@code orbitkv-bulk-serve-<n>}), which reads requests and writes replies in turn (a connection
 * serves one batch at a time; a requester pipelines by opening several); one shared timer thread
 * cuts handshakes that take too long. {@link #close()} may be called from any thread, including
 * a connection's own.
 *
 * <p>Invariants: every ticket this server obtained is released by it, exactly once — after its
 * page was written to the socket, when the page was refused, or when the connection failed
 * (tickets authorized ahead are released as their authorization completes); every
 * {@code beginTransfer} that returned Reading is ended. So no Release is owed by the requester and
 * a source whose requester vanished keeps no pin. {@code sendQueue.used() <= sendQueueBytes}.
 * Error boundary (layer {@code transport}): a bug ends a connection as an IOException does, counted.
 *
 * <p>Design note: blocking NIO with a thread per connection rather than an event loop: a
 * connection spends its life in two blocking calls (read a 2–21 KB request, write its pages,
 * {@link PageWriter}), the pin must outlive the write (a blocking {@code write} returns when the
 * kernel has copied the bytes, so the ticket can be released right after, with no completion
 * callback to track), and 4 connections × 16 peers is 64 threads.
 */
public final class BulkServer implements AutoCloseable {

    /** Pages authorized (pinned) ahead of the page being written. */
    public static final int AUTHORIZE_AHEAD = 8;

    /** Test hooks: a page about to be sent; each payload piece as it goes to the socket. */
    interface SendHook {
        SendHook NONE = new SendHook() { };

        default void beforePage(int index) {
        }

        /** The bytes to send for {@code piece} (the trailer checksums the pinned bytes, not these); must not modify {@code piece}. */
        default ByteBuffer piece(int index, long offsetBytes, ByteBuffer piece) {
            return piece;
        }
    }

    private final PeerSource source;
    private final BulkAuth auth;
    private final Optional<SSLContext> tls;
    private final BulkLimits limits;
    private final ServerSocketChannel listener;
    private final ByteBudget sendQueue;
    private final ScheduledExecutorService timer;
    private final Set<BulkSocketHolder> connections = ConcurrentHashMap.newKeySet();
    private final AtomicInteger threadIds = new AtomicInteger();
    private final Thread acceptor;
    private final List<io.micrometer.core.instrument.Meter> meters = new ArrayList<>();
    private final MeterRegistry registry;
    private final Counter authFailures;
    private final Counter malformed;
    private final Counter refusedConnections;
    private final Counter pagesRefused;
    private final Counter pagesBusy;
    private final Counter batchesServed;
    private final PageWriter pages;
    private volatile SendHook hook = SendHook.NONE;
    private volatile boolean closed;

    private BulkServer(ServerSocketChannel listener, PeerSource source, ClusterSecurity security, Optional<SSLContext> tls,
                       BulkLimits limits, MeterRegistry registry) {
        this.listener = listener;
        this.source = source;
        this.auth = new BulkAuth(security);
        this.tls = tls;
        this.limits = limits;
        this.registry = registry;
        this.sendQueue = new ByteBudget(limits.sendQueueBytes());
        this.timer = BulkTimer.create("orbitkv-bulk-source-timer");
        meters.add(sendQueue.register(registry, "orbitkv.peer.bulk.send.queue", Tags.empty(),
                "payload bytes the source is writing to bulk connections"));
        meters.add(Gauge.builder("orbitkv.peer.bulk.connections", connections, Set::size).tags("side", "source")
                .description("bulk data plane connections open (side: requester, or source with handshaking ones)").register(registry));
        authFailures = counter("orbitkv.peer.bulk.auth.failures", "side", "source");
        malformed = counter("orbitkv.peer.bulk.malformed", "side", "source");
        refusedConnections = counter("orbitkv.peer.bulk.connections.refused", "side", "source");
        pagesRefused = counter("orbitkv.peer.bulk.pages", "outcome", "refused");
        pagesBusy = counter("orbitkv.peer.bulk.pages", "outcome", "busy");
        batchesServed = counter("orbitkv.peer.bulk.requests", "side", "source");
        SentChecksums checksums = new SentChecksums();
        meters.add(Gauge.builder("orbitkv.peer.bulk.checksums.remembered", checksums, SentChecksums::size)
                .description("images whose payload checksum the source remembers from an earlier send").register(registry));
        meters.add(Gauge.builder("orbitkv.peer.bulk.checksums.remembered.bound", () -> SentChecksums.MAX_ENTRIES)
                .description("bound of images whose payload checksum the source remembers").register(registry));
        pages = new PageWriter(checksums, counter("orbitkv.peer.bulk.pages", "outcome", "sent"),
                counter("orbitkv.peer.bulk.bytes", "side", "source"), counter("orbitkv.peer.bulk.checksums", "outcome", "reused"),
                counter("orbitkv.peer.bulk.checksums", "outcome", "computed"));
        this.acceptor = Thread.ofPlatform().name("orbitkv-bulk-accept").daemon().unstarted(this::acceptLoop);
    }

    private Counter counter(String name, String tag, String value) {
        Counter c = Counter.builder(name).tag(tag, value).description(BulkMeters.description(name)).register(registry);
        meters.add(c);
        return c;
    }

    /**
     * Binds {@code address} and starts serving {@code source}'s pages to peers that know the
     * cluster token (and, when {@code security} names TLS files, present a certificate of the
     * cluster's CA).
     *
     * @throws IOException if the address cannot be bound or the TLS files cannot be read
     */
    public static BulkServer start(InetSocketAddress address, PeerSource source, ClusterSecurity security,
                                   BulkLimits limits, MeterRegistry registry) throws IOException {
        Objects.requireNonNull(source, "source");
        Objects.requireNonNull(limits, "limits");
        Optional<SSLContext> tls = BulkTls.context(security);
        ServerSocketChannel listener = ServerSocketChannel.open();
        try {
            listener.bind(address, 128);
        } catch (IOException | RuntimeException e) {
            listener.close();
            throw e;
        }
        BulkServer server = new BulkServer(listener, source, security, tls, limits, registry);
        server.acceptor.start();
        return server;
    }

    /** The bound address (the real port when 0 was asked for). */
    public InetSocketAddress address() {
        try {
            return (InetSocketAddress) listener.getLocalAddress();
        } catch (IOException e) {
            throw new IllegalStateException("bulk listener closed", e);
        }
    }

    void hook(SendHook hook) {
        this.hook = Objects.requireNonNull(hook, "hook");
    }

    /** Tests: payload bytes per gather call (pages of several pieces with smaller pages). */
    void pieceBytes(int bytes) {
        pages.pieceBytes(bytes);
    }

    /** Pages sent with the checksum of an earlier send of the same image. */
    long checksumsReused() {
        return pages.checksumsReused();
    }

    private void acceptLoop() {
        while (!closed) {
            SocketChannel ch;
            try {
                ch = listener.accept();
            } catch (ClosedChannelException e) {
                return;
            } catch (IOException e) {
                if (closed) return;
                continue; // e.g. EMFILE: the next accept may succeed; the peer sees a reset
            }
            if (connections.size() >= limits.maxConnections()) {
                refusedConnections.increment();
                try (ch) {
                    ch.write(new BulkLayout.ErrorFrame(BulkLayout.ErrorCode.BUSY).encode());
                } catch (IOException e) {
                    // refused anyway
                }
                continue;
            }
            BulkSocketHolder holder = new BulkSocketHolder(ch);
            connections.add(holder);
            if (closed) holder.close();
            holder.thread = Thread.ofPlatform().name("orbitkv-bulk-serve-" + threadIds.incrementAndGet()).daemon()
                    .start(() -> serve(holder));
        }
    }

    private void serve(BulkSocketHolder holder) {
        ScheduledFuture<?> handshake = timer.schedule(holder::close, limits.handshakeTimeout().toNanos(), TimeUnit.NANOSECONDS);
        try {
            BulkSocket socket = BulkSocket.accepted(holder.channel, tls, (int) limits.handshakeTimeout().toMillis());
            holder.socket(socket);
            if (!handshake(socket)) return;
            handshake.cancel(false);
            ByteBuffer header = ByteBuffer.allocate(BulkLayout.HEADER_BYTES);
            while (!closed) {
                header.clear();
                socket.readFully(header);
                header.flip();
                switch (BulkLayout.decodeHeader(header, limits)) {
                    case BulkLayout.Malformed m -> {
                        malformed(socket);
                        return;
                    }
                    case BulkLayout.Header h -> {
                        if (h.type() != BulkLayout.BATCH_REQUEST) {
                            malformed(socket);
                            return;
                        }
                        ByteBuffer body = ByteBuffer.allocate(h.bodyBytes()); // <= limits.maxRequestBodyBytes()
                        socket.readFully(body);
                        body.flip();
                        switch (BulkLayout.decodeRequest(body, limits)) {
                            case BulkLayout.BatchRequest request -> serveBatch(socket, request);
                            default -> {
                                malformed(socket);
                                return;
                            }
                        }
                    }
                }
            }
        } catch (IOException e) {
            // the requester went away, a deadline closed the socket, or the server is closing:
            // serveBatch released every ticket it held; nothing else is owed
        } catch (RuntimeException e) { // a bug: the connection closes as after a socket failure
            UnexpectedErrors.record(UnexpectedErrors.Layer.TRANSPORT, "BulkServer.serve", "a closed connection (its pages are misses)", e);
        } finally {
            handshake.cancel(false);
            holder.close();
            connections.remove(holder);
        }
    }

    /** HELLO, then AUTH checked in constant time, then AUTH_OK; false (counted, ERROR sent, closed) on any failure. */
    private boolean handshake(BulkSocket socket) throws IOException {
        byte[] serverNonce = BulkAuth.nonce();
        socket.write(new BulkLayout.Hello(serverNonce).encode());
        ByteBuffer header = ByteBuffer.allocate(BulkLayout.HEADER_BYTES);
        socket.readFully(header);
        header.flip();
        if (!(BulkLayout.decodeHeader(header, limits) instanceof BulkLayout.Header h) || h.type() != BulkLayout.AUTH) {
            malformed(socket);
            return false;
        }
        ByteBuffer body = ByteBuffer.allocate(h.bodyBytes());
        socket.readFully(body);
        body.flip();
        if (!(BulkLayout.decodeControl(h, body) instanceof BulkLayout.Auth a)
                || !BulkAuth.matches(auth.requesterMac(serverNonce, a.clientNonce()), a.mac())) {
            authFailures.increment();
            try {
                socket.write(new BulkLayout.ErrorFrame(BulkLayout.ErrorCode.AUTH_FAILED).encode());
            } catch (IOException e) {
                // closing anyway
            }
            return false;
        }
        socket.write(new BulkLayout.AuthOk(auth.sourceMac(serverNonce, a.clientNonce())).encode());
        return true;
    }

    private void malformed(BulkSocket socket) {
        malformed.increment();
        try {
            socket.write(new BulkLayout.ErrorFrame(BulkLayout.ErrorCode.MALFORMED).encode());
        } catch (IOException e) {
            // closing anyway
        }
    }

    /**
     * Serves one batch: authorizes up to {@link #AUTHORIZE_AHEAD} pages ahead, sends each page in
     * order. On a socket failure, every ticket authorized but not yet sent is released as its
     * authorization completes, then the failure propagates (the connection closes).
     */
    private void serveBatch(BulkSocket socket, BulkLayout.BatchRequest request) throws IOException {
        batchesServed.increment();
        int n = request.pages().size();
        List<CompletableFuture<AuthorizeResult>> authorized = new ArrayList<>(Math.min(n, AUTHORIZE_AHEAD));
        int next = 0;
        int handed = 0;
        long deadline = System.nanoTime() + limits.batchDeadline().toNanos();
        try {
            for (int i = 0; i < n; i++) {
                while (next < n && next < i + AUTHORIZE_AHEAD) authorized.add(authorize(request, next++));
                AuthorizeResult r = await(authorized.get(i), request.requester(), deadline);
                authorized.set(i, null);
                handed = i + 1;
                sendPage(socket, request, i, r);
            }
        } finally {
            for (int j = handed; j < next; j++) {
                authorized.get(j).thenAccept(r -> releaseIfGranted(r, request.requester()));
            }
        }
    }

    private CompletableFuture<AuthorizeResult> authorize(BulkLayout.BatchRequest request, int index) {
        return PeerBoundary.call(UnexpectedErrors.Layer.TRANSPORT, "BulkServer.authorize", "a NOT_SERVING refusal",
                new AuthorizeResult.Rejected(Rejection.NOT_SERVING), () -> source.authorize(request.authorizeRequest(index)));
    }

    private AuthorizeResult await(CompletableFuture<AuthorizeResult> f, NodeIncarnation requester, long deadline)
            throws IOException {
        try {
            return f.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            // an SSD staging slower than the batch deadline: refuse the page, free its pin when it lands
            f.thenAccept(r -> releaseIfGranted(r, requester));
            return new AuthorizeResult.Rejected(Rejection.SOURCE_BUSY);
        } catch (ExecutionException e) { // not reached: authorize() answers failures as values
            return new AuthorizeResult.Rejected(Rejection.NOT_SERVING);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            f.thenAccept(r -> releaseIfGranted(r, requester));
            throw new IOException("interrupted");
        }
    }

    private void releaseIfGranted(AuthorizeResult r, NodeIncarnation requester) {
        if (r instanceof AuthorizeResult.Granted g) source.release(g.ticketId(), requester);
    }

    /** Sends page {@code index} (or its refusal); owns {@code r}'s ticket and releases it before returning. */
    private void sendPage(BulkSocket socket, BulkLayout.BatchRequest request, int index, AuthorizeResult r) throws IOException {
        switch (r) {
            case AuthorizeResult.Rejected rejected -> refuse(socket, request, index, rejected.reason());
            case AuthorizeResult.Granted g -> {
                NodeIncarnation requester = request.requester();
                if (!sendQueue.acquire(g.lengthBytes(), limits.budgetWait().toNanos())) {
                    source.release(g.ticketId(), requester);
                    pagesBusy.increment();
                    refuse(socket, request, index, Rejection.SOURCE_BUSY);
                    return;
                }
                try {
                    switch (source.beginTransfer(g.ticketId(), requester)) {
                        case TicketTable.BeginResult.Refused refused -> refuse(socket, request, index, Rejection.GENERATION_GONE);
                        case TicketTable.BeginResult.Reading reading -> {
                            try {
                                SendHook h = hook;
                                h.beforePage(index);
                                pages.write(socket, request.batchId(), index, g, reading.image(), h);
                            } finally {
                                source.endTransfer(g.ticketId());
                            }
                        }
                    }
                } finally {
                    source.release(g.ticketId(), requester);
                    sendQueue.release(g.lengthBytes());
                }
            }
        }
    }

    private void refuse(BulkSocket socket, BulkLayout.BatchRequest request, int index, Rejection reason) throws IOException {
        pagesRefused.increment();
        socket.write(new BulkLayout.PageRefused(request.batchId(), index, reason).encode());
    }

    /** Connections refused for a failed authentication. */
    public long authFailures() {
        return (long) authFailures.count();
    }

    /** Connections closed for a malformed frame. */
    public long malformedFrames() {
        return (long) malformed.count();
    }

    /** BATCH_REQUESTs received (well-formed). */
    public long batchesServed() {
        return (long) batchesServed.count();
    }

    /** Open connections. */
    public int connections() {
        return connections.size();
    }

    /** Payload bytes being written now, and the most ever. */
    public long sendQueueBytes() {
        return sendQueue.used();
    }

    long sendQueuePeak() {
        return sendQueue.peak();
    }

    /** Stops accepting and closes every connection (their threads release what they hold). */
    @Override
    public void close() {
        if (closed) return;
        closed = true;
        try {
            listener.close();
        } catch (IOException e) {
            // closing
        }
        for (BulkSocketHolder c : connections) c.close();
        // let the connection threads release their tickets before the owner drains the ticket table
        for (BulkSocketHolder c : connections) {
            Thread t = c.thread;
            if (t == null || t == Thread.currentThread()) continue;
            try {
                t.join(TimeUnit.SECONDS.toMillis(1));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        timer.shutdownNow();
        if (Thread.currentThread() != acceptor) {
            try {
                acceptor.join(TimeUnit.SECONDS.toMillis(2));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        for (io.micrometer.core.instrument.Meter m : meters) registry.remove(m);
    }

    /** An accepted channel and, once wrapped, its {@link BulkSocket}; closable from any thread. */
    private static final class BulkSocketHolder {
        final SocketChannel channel;
        volatile Thread thread;
        private volatile BulkSocket socket;
        private volatile boolean closed;

        BulkSocketHolder(SocketChannel channel) {
            this.channel = channel;
        }

        void socket(BulkSocket s) {
            socket = s;
            if (closed) s.close();
        }

        void close() {
            closed = true;
            BulkSocket s = socket;
            if (s != null) s.close();
            try {
                channel.close();
            } catch (IOException e) {
                // closing
            }
        }
    }
}
