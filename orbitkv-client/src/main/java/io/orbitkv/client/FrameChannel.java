package io.orbitkv.client;

import io.orbitkv.state.protocol.DecodeResult;
import io.orbitkv.state.protocol.Direction;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.FrameDecoder;
import io.orbitkv.state.protocol.FrameEncoder;
import io.orbitkv.state.protocol.ProtocolLimits;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import java.io.EOFException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ClosedSelectorException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;

/**
 * One engine-channel connection: the Unix socket, the request-id counter, the table of requests
 * awaiting their reply, and who reads the socket: a caller waiting for its reply, or else the
 * background reader thread.
 *
 * <p>Thread model: {@link #send} may be called from any thread; each frame is encoded whole and
 * written under {@code writeLock}, so frames of two threads never interleave (protocol.md 2,
 * publication rule) and requests may be pipelined. Whoever holds {@code readLock} reads the
 * socket, completes replies' futures by request id and hands every reply (before completing it)
 * and every COMPLETION to {@code onFrame}, in arrival order, so a listener sees a reply before any
 * COMPLETION it started (protocol.md 9.3). A caller blocked in {@link #await} takes the lock and
 * reads until its own future is done (leader); a second caller that finds the lock held parks
 * (follower) until its future completes or the lock is handed on. Once no caller has waited for
 * {@link #READER_GRACE_NANOS}, the reader thread takes the role: it waits for the socket to turn
 * readable and reads what arrives (COMPLETIONs of asynchronous operations, replies of sends whose
 * futures are not awaited through the client). Dependent stages
 * attached to a returned future without {@code *Async} run on whichever thread read the reply
 * and must be short; one that blocks on this client from there waits without reading.
 *
 * <p>Invariants: {@code pending} holds only requests written and not yet answered, so it is
 * bounded by what the caller has in flight; once the channel has failed ({@code failure} set),
 * every pending and every later request completes exceptionally with that failure. Someone reads
 * whenever a reply or COMPLETION can arrive: a waiting caller (a leader leaving wakes the
 * followers), or the reader thread at most {@link #READER_GRACE_NANOS} after the last caller left.
 * No call wakes the reader thread: while calls keep coming it wakes only on its own timer, once per
 * {@link #READER_GRACE_NANOS}, and parks again; a call that finds it waiting for the socket leaves
 * it there, and it parks once the reply woke it (waking it at the call's start, so that it was
 * parked before the reply, made a QUERY after an idle pause slower on 2 vCPUs: docs/performance.md,
 * "The Java client reads its own reply"). A caller joins {@code followers} only when it finds the
 * lock held, so an uncontended call allocates nothing for the hand-off.
 *
 * <p>Design note: the caller reads its own reply because a reader thread that completes a future
 * costs every blocking call a second thread wake-up (the reader's, then the caller's) on top of
 * the one the reply itself wakes; see docs/performance.md, "The Java client reads its own reply".
 * Replies are routed by request id through a map rather than a FIFO, although the Manager
 * answers in order, because a map survives a caller that abandons a future and it is what the
 * protocol promises (same id). The socket is non-blocking so a reader can stop waiting for it:
 * each of the three roles (background reader, leader, writer facing a full socket buffer) waits
 * on its own selector. A leader on a virtual thread holds its carrier while it selects (the JDK
 * adds a carrier for the time); engines call from platform threads. The receive buffer is sized
 * to {@code maxFrameBytes} (4 MiB by default) once: no frame can be larger.
 */
final class FrameChannel implements AutoCloseable {

    /**
     * How long the reader thread parks at a time while blocking calls keep coming, before it waits
     * for the socket itself once none came: calls closer together than this cost it one timer
     * wake-up per period, not one per call, and a frame nobody waits for (a COMPLETION of an
     * asynchronous operation) is read at most about this late after the last call.
     */
    static final long READER_GRACE_NANOS = TimeUnit.MILLISECONDS.toNanos(1);

    /** {@link #READER_GRACE_NANOS}, or longer for tests that need frames left unread between calls. */
    private final long readerGraceNanos;

    private final SocketChannel socket;
    private final FrameDecoder decoder = new FrameDecoder(ProtocolLimits.DEFAULTS, Direction.TO_CLIENT);
    private final Object writeLock = new Object();
    private final AtomicLong nextRequestId = new AtomicLong(1);
    private final Map<Long, CompletableFuture<Reply>> pending = new ConcurrentHashMap<>();
    private final AtomicReference<RuntimeException> failure = new AtomicReference<>();
    private final Consumer<Reply> onFrame;
    private final Consumer<RuntimeException> onFailure;
    private final Thread reader;
    /** Held by whoever reads the socket; guards {@code in} and the decoder. */
    private final ReentrantLock readLock = new ReentrantLock();
    /** Callers inside {@link #await}; while above 0 the reader thread does not read. */
    private final AtomicInteger waiting = new AtomicInteger();
    /** Calls to {@link #await} so far: the reader thread waits for the socket only after a quiet {@link #READER_GRACE_NANOS}. */
    private final AtomicLong awaits = new AtomicLong();
    /** Callers parked in {@link #await} without the read lock: woken when it is released. */
    private final Queue<Thread> followers = new ConcurrentLinkedQueue<>();
    private final Selector readerSelector;
    private final Selector leaderSelector;
    private final Selector writerSelector;
    // @GuardedBy("readLock")
    private final ByteBuffer in;

    private FrameChannel(SocketChannel socket, Consumer<Reply> onFrame, Consumer<RuntimeException> onFailure,
                         long readerGraceNanos) throws IOException {
        this.socket = socket;
        this.readerGraceNanos = readerGraceNanos;
        this.onFrame = onFrame;
        this.onFailure = onFailure;
        this.in = ByteBuffer.allocate(decoder.limits().maxFrameBytes());
        socket.configureBlocking(false);
        this.readerSelector = Selector.open();
        Selector leader = null;
        Selector writer = null;
        try {
            leader = Selector.open();
            writer = Selector.open();
            socket.register(readerSelector, SelectionKey.OP_READ);
            socket.register(leader, SelectionKey.OP_READ);
            socket.register(writer, SelectionKey.OP_WRITE);
        } catch (IOException | RuntimeException e) {
            closeQuietly(readerSelector);
            if (leader != null) closeQuietly(leader);
            if (writer != null) closeQuietly(writer);
            throw e;
        }
        this.leaderSelector = leader;
        this.writerSelector = writer;
        this.reader = Thread.ofPlatform().daemon().name("orbitkv-client-reader").unstarted(this::readLoop);
    }

    /**
     * Connects to the Manager's socket and starts the reader thread. {@code onFrame} sees every
     * reply and COMPLETION on the thread that read it; {@code onFailure} is called once, when the
     * connection ends for any reason, with the cause every pending request fails with. The reader
     * thread reads once no blocking call has come for {@code readerGraceNanos}
     * ({@link #READER_GRACE_NANOS} but in tests).
     */
    static FrameChannel open(Path socketPath, Consumer<Reply> onFrame, Consumer<RuntimeException> onFailure,
                             long readerGraceNanos) throws IOException {
        SocketChannel socket = SocketChannel.open(StandardProtocolFamily.UNIX);
        FrameChannel channel;
        try {
            socket.connect(UnixDomainSocketAddress.of(socketPath));
            channel = new FrameChannel(socket, onFrame, onFailure, readerGraceNanos);
        } catch (IOException e) {
            socket.close();
            throw e;
        }
        channel.reader.start();
        return channel;
    }

    /** Writes {@code request} under a fresh request id; the future completes with its reply (or ERROR). */
    CompletableFuture<Reply> send(Request request) {
        long id = nextRequestId.getAndUpdate(v -> v == Long.MAX_VALUE ? 1 : v + 1);
        byte[] frame = FrameEncoder.toBytes(id, request);
        CompletableFuture<Reply> reply = new CompletableFuture<>();
        pending.put(id, reply);
        RuntimeException failed = failure.get();
        if (failed != null) {
            pending.remove(id);
            return CompletableFuture.failedFuture(failed);
        }
        try {
            synchronized (writeLock) {
                ByteBuffer out = ByteBuffer.wrap(frame);
                while (out.hasRemaining()) {
                    if (socket.write(out) == 0) awaitWritable();
                }
            }
        } catch (IOException | ClosedSelectorException e) {
            fail(new UncheckedIOException("writing " + request.type() + " failed", asIo(e)));
        }
        return reply;
    }

    /** Waits, under {@code writeLock}, until the socket's send buffer has room (the Manager reads slowly). */
    private void awaitWritable() throws IOException {
        if (failure.get() != null) throw new ClosedChannelException();
        writerSelector.select();
        writerSelector.selectedKeys().clear();
    }

    /**
     * Returns once {@code future} is done, {@code timeoutNanos} have passed or the channel has
     * failed, reading the socket on this thread while no other thread does. A thread that already
     * reads (a dependent stage blocking on this client) returns at once: its caller waits without
     * reading, as it must not read frames in the middle of dispatching one.
     */
    void await(CompletableFuture<?> future, long timeoutNanos) throws InterruptedException {
        if (future.isDone() || readLock.isHeldByCurrentThread()) return;
        long deadline = System.nanoTime() + timeoutNanos;
        Thread me = Thread.currentThread();
        awaits.incrementAndGet();
        waiting.incrementAndGet();
        boolean queued = false;
        try {
            while (!future.isDone() && failure.get() == null) {
                if (Thread.interrupted()) throw new InterruptedException();
                long left = deadline - System.nanoTime();
                if (left <= 0) return;
                if (readLock.tryLock()) {
                    if (queued) {
                        followers.remove(me);
                        queued = false;
                    }
                    try {
                        lead(future, deadline);
                    } finally {
                        readLock.unlock();
                        wakeFollowers();
                    }
                } else if (!queued) {
                    // A follower: queued first, then the lock is tried once more before parking,
                    // so a leader that left in between is not missed (it wakes whoever is queued).
                    followers.add(me);
                    queued = true;
                    future.whenComplete((r, e) -> LockSupport.unpark(me)); // woken when its reply is read
                } else {
                    LockSupport.parkNanos(this, left);
                }
            }
        } finally {
            if (queued) followers.remove(me);
            waiting.decrementAndGet(); // the reader thread takes over after its grace
        }
    }

    /**
     * Reads and dispatches, without waiting, whatever frames have already arrived, when no other
     * thread is reading (that one dispatches them). For a caller about to consult state that
     * earlier replies update (a RELEASED that ends an operation), since between calls the reader
     * thread reads up to {@link #READER_GRACE_NANOS} late.
     */
    void readArrived() {
        if (readLock.isHeldByCurrentThread() || !readLock.tryLock()) return;
        try {
            while (failure.get() == null && readAvailable()) {
                // dispatched; read on until the socket is empty
            }
        } catch (IOException e) {
            lost(e);
        } catch (RuntimeException e) {
            fail(e);
        } finally {
            readLock.unlock();
            wakeFollowers();
        }
    }

    /** The failure that ended the channel, if it has ended. */
    RuntimeException failure() {
        return failure.get();
    }

    /** Reads, holding {@code readLock}, until {@code future} is done, the deadline passes or the channel fails. */
    private void lead(CompletableFuture<?> future, long deadline) {
        try {
            while (!future.isDone() && failure.get() == null) {
                if (readAvailable()) continue;
                long left = deadline - System.nanoTime();
                if (left <= 0 || Thread.currentThread().isInterrupted()) return;
                leaderSelector.select(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
                leaderSelector.selectedKeys().clear();
            }
        } catch (IOException | ClosedSelectorException e) {
            lost(asIo(e));
        } catch (RuntimeException e) {
            fail(e);
        }
    }

    private void wakeFollowers() {
        for (Thread t : followers) LockSupport.unpark(t);
    }

    private void readLoop() {
        try {
            long seen = -1;
            while (failure.get() == null) {
                long calls = awaits.get();
                if (waiting.get() > 0 || calls != seen) {
                    seen = calls;
                    LockSupport.parkNanos(this, readerGraceNanos);
                    continue;
                }
                readerSelector.select(); // a caller that comes meanwhile leads; this thread then parks again
                readerSelector.selectedKeys().clear();
                if (waiting.get() > 0 || !readLock.tryLock()) continue;
                try {
                    readAvailable();
                } finally {
                    readLock.unlock();
                    wakeFollowers();
                }
            }
        } catch (IOException | ClosedSelectorException e) {
            lost(asIo(e));
        } catch (RuntimeException e) {
            fail(e);
        } finally {
            closeQuietly(readerSelector);
            closeQuietly(leaderSelector);
            closeQuietly(writerSelector);
        }
    }

    /** One non-blocking read, holding {@code readLock}; dispatches every whole frame. False when nothing was there. */
    private boolean readAvailable() throws IOException {
        int n = socket.read(in);
        if (n < 0) throw new EOFException("the Manager closed the connection");
        if (n == 0) return false;
        in.flip();
        drain(in);
        in.compact();
        return true;
    }

    /** Dispatches every whole frame at the front of {@code in}; leaves a partial frame in place. */
    private void drain(ByteBuffer in) throws IOException {
        while (true) {
            switch (decoder.decode(in)) {
                case DecodeResult.NeedBytes n -> {
                    return;
                }
                case DecodeResult.Decoded d -> {
                    in.position(in.position() + d.bytesConsumed());
                    dispatch(d.requestId(), (Reply) d.frame());
                }
                case DecodeResult.Malformed m -> throw new IOException("the Manager sent a bad frame: " + m.code()
                        + " " + m.message());
            }
        }
    }

    private void dispatch(long requestId, Reply reply) {
        if (requestId == 0) {
            if (reply instanceof Reply.Error(ErrorCode code, String message)) {
                // Unsolicited: the Manager is about to close this connection (STALE_EPOCH, a refused header).
                fail(new OrbitKvException(code, message));
                return;
            }
            onFrame.accept(reply);
            return;
        }
        CompletableFuture<Reply> waiter = pending.remove(requestId);
        onFrame.accept(reply);
        if (waiter != null) waiter.complete(reply);
    }

    private void fail(RuntimeException cause) {
        boolean first = failure.compareAndSet(null, cause);
        RuntimeException failed = failure.get();
        if (first) onFailure.accept(failed);
        for (Long id : pending.keySet()) {
            CompletableFuture<Reply> waiter = pending.remove(id);
            if (waiter != null) waiter.completeExceptionally(failed);
        }
        try {
            socket.close();
        } catch (IOException ignored) {
            // already failing; the first cause is what callers see
        }
        readerSelector.wakeup();
        leaderSelector.wakeup();
        writerSelector.wakeup();
        LockSupport.unpark(reader);
        wakeFollowers();
    }

    /** Ends the channel for an I/O failure: "connection lost", or "connection closed" when it was already ending. */
    private void lost(IOException e) {
        fail(new UncheckedIOException(failure.get() == null ? "connection lost" : "connection closed", e));
    }

    private static IOException asIo(Exception e) {
        return e instanceof IOException io ? io : new IOException(e);
    }

    private static void closeQuietly(Selector selector) {
        try {
            selector.close();
        } catch (IOException ignored) {
            // the channel has ended; nothing waits on this selector any more
        }
    }

    /** Closes the socket and waits for the reader thread to finish; pending requests fail. */
    @Override
    public void close() {
        fail(new UncheckedIOException(new IOException("the client closed the connection")));
        try {
            reader.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
