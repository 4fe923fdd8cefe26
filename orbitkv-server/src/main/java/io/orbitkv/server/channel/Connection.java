package io.orbitkv.server.channel;

import io.orbitkv.core.engine.ChannelSession;
import io.orbitkv.core.engine.EventSink;
import io.orbitkv.core.engine.OpenResult;
import io.orbitkv.core.log.RateLimitedLog;
import io.orbitkv.state.protocol.DecodeResult;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.FrameDecoder;
import io.orbitkv.state.protocol.FrameEncoder;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import java.io.IOException;
import java.nio.file.attribute.UserPrincipal;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.function.Consumer;
import jdk.net.ExtendedSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * One accepted engine-channel connection: owns its socket, its receive buffer, its bounded
 * outbound COMPLETION queue and the {@link ChannelSession} opened for it.
 *
 * <p>Thread model: a <em>reader</em> platform thread ({@link #run}) reads, decodes, calls
 * {@link ChannelSession#handle} one request at a time in arrival order and writes each reply; a
 * <em>writer</em> platform thread drains the COMPLETION queue when no request is being handled,
 * and the reader drains it after each reply (so a client that pipelines requests still gets its
 * events promptly). Both write whole frames under {@link #writeLock} and take events from the
 * queue only while holding it, so frames never interleave and events keep their queue order;
 * a reply and the events drained behind it go out in one gathering write. {@link #complete} and
 * {@link #fence} are called from any thread; an event the reader itself queues (inside
 * {@code handle}: an inline restore's RESTORE_DONE) does not wake the writer, as the reader
 * writes it right after the reply. The reader alone calls {@code handle} and, once, {@code close}.
 *
 * <p>Invariants: a COMPLETION is never written while a request is being handled and its reply
 * not yet written ({@link #inHandle}), so an event caused by a request always follows that
 * request's reply (protocol §9.3); the receive buffer never exceeds {@code maxFrameBytes} (the
 * decoder refuses a longer length from its first 4 bytes); the outbound queue holds at most
 * {@code outboundQueueFrames} events, one more is dropped and counted (clients can QUERY_POLL);
 * {@link ChannelSession#close()} runs exactly once, after the last {@code handle} returned; a
 * connection not REGISTERED when {@link #registerDeadlinePassed} is called is closed with ERROR
 * REGISTER_TIMEOUT, never in the middle of a request's handling.
 *
 * <p>Design note: the receive buffer starts at 64 KiB and grows to the frame's declared length
 * only when a frame needs it, so 256 idle connections cost 16 MiB of heap instead of the 1 GiB a
 * fixed {@code maxFrameBytes} (4 MiB) buffer each would. Blocking I/O on a thread per
 * connection keeps the per-connection code a straight loop; platform threads rather than virtual
 * ones because a request after an idle pause is woken once, not via a poller and a carrier
 * ({@link ChannelServer}'s design note has the measurement).
 */
final class Connection implements EventSink {

    private static final Logger LOG = Logger.getLogger(Connection.class.getName());
    /**
     * Session bugs answered INTERNAL: a client repeating the request that triggers one would
     * otherwise write a stack trace per frame. One line per kind per 10 s; the stack trace at DEBUG.
     */
    private static final RateLimitedLog INTERNAL = RateLimitedLog.tenSeconds(Connection.class.getName());
    /** Initial receive buffer, in bytes. */
    static final int INITIAL_RECEIVE_BYTES = 64 * 1024;

    private final long id;
    private final SocketChannel channel;
    private final FrameDecoder decoder;
    private final ChannelMetrics metrics;
    private final BlockingQueue<Reply.Completion> outbound;
    private final ReentrantLock writeLock = new ReentrantLock();
    private final Condition handleDone = writeLock.newCondition();
    /** One permit per event offered to {@link #outbound}; wakes the writer without taking the lock. */
    private final Semaphore queued = new Semaphore(0);
    /** Guarded by writeLock: a request is being handled and its reply is not written yet. */
    private boolean inHandle;
    private final AtomicBoolean closed = new AtomicBoolean();
    /** True until the first REGISTERED is about to be written or the connection ends; cleared once, then {@link #onLeftUnregistered} runs. */
    private final AtomicBoolean unregistered = new AtomicBoolean(true);
    /** Set by {@link #registerDeadlinePassed}: an unregistered connection closes as soon as no request is in hand. */
    private volatile boolean deadlinePassed;
    private final Consumer<Connection> onLeftUnregistered;
    /** When the connection was accepted ({@link System#nanoTime}). */
    private final long acceptedAtNanos = System.nanoTime();
    /** Set by the reader once a byte arrived: from then on a newcomer cannot displace the connection. */
    private volatile boolean heard;
    private final Runnable onExit;
    private volatile Thread writer;
    /** The reader thread; an event it queues (inside {@code handle}) it writes itself after the reply. */
    private volatile Thread reader;
    private ByteBuffer receive = ByteBuffer.allocate(INITIAL_RECEIVE_BYTES);

    /**
     * @param onLeftUnregistered runs exactly once, with this connection: right before the first
     *                           REGISTERED reply is written (so an engine that read it and opens
     *                           another connection finds the place free), or when the connection
     *                           ends without one
     * @param onExit             runs once when the reader loop ends
     */
    Connection(long id, SocketChannel channel, FrameDecoder decoder, int outboundQueueFrames, ChannelMetrics metrics,
               Consumer<Connection> onLeftUnregistered, Runnable onExit) {
        this.id = id;
        this.channel = channel;
        this.decoder = decoder;
        this.metrics = metrics;
        this.outbound = new ArrayBlockingQueue<>(outboundQueueFrames);
        this.onLeftUnregistered = onLeftUnregistered;
        this.onExit = onExit;
    }

    /**
     * The registration deadline passed (protocol §9.1): a connection still not REGISTERED gets ERROR
     * REGISTER_TIMEOUT (request id 0) and is closed, at once when no request is being handled, else
     * right after that request's reply (a REGISTER under way may still be admitted). Any thread.
     */
    void registerDeadlinePassed(String message) {
        if (!unregistered.get() || closed.get()) return;
        deadlinePassed = true;
        // Under writeLock, which serve() takes to mark a request in hand: either that request's
        // reply sees the flag and closes, or this closes first; never both, never mid-request.
        // The lock is held for longer than a moment only by a write blocked on a client that does
        // not read its replies: then the socket is closed without the ERROR, which ends that write.
        boolean locked;
        try {
            locked = writeLock.tryLock(100, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return;
        }
        if (!locked) {
            metrics.registerTimeouts.increment();
            shutdown();
            return;
        }
        try {
            if (inHandle || !unregistered.get() || closed.get()) return;
            metrics.registerTimeouts.increment();
            sendAndClose(ErrorCode.REGISTER_TIMEOUT, message);
        } finally {
            writeLock.unlock();
        }
    }

    private void leaveUnregistered() {
        if (unregistered.compareAndSet(true, false)) onLeftUnregistered.accept(this);
    }

    /** True if no byte has arrived in the {@code graceNanos} since the connection was accepted. */
    boolean silentFor(long graceNanos, long nowNanos) {
        return !heard && nowNanos - acceptedAtNanos >= graceNanos;
    }

    /**
     * A newcomer took this silent connection's place: ERROR BUSY under request id 0, then close,
     * on a thread of its own (the caller is the accept thread). Any thread.
     */
    void displace(String message) {
        Thread.ofVirtual().name("orbitkv-conn-" + id + "-displaced").start(() -> sendAndClose(ErrorCode.BUSY, message));
    }

    long id() {
        return id;
    }

    /**
     * The connecting process's user as the kernel recorded it at {@code connect} ({@code SO_PEERCRED}):
     * not a claim the client makes, so REGISTER_REGION can hold it to its own files.
     */
    private Optional<UserPrincipal> peer() {
        try {
            return Optional.of(channel.getOption(ExtendedSocketOptions.SO_PEERCRED).user());
        } catch (IOException | UnsupportedOperationException e) {
            LOG.fine(() -> "connection " + id + ": no peer credentials: " + e);
            return Optional.empty();
        }
    }

    /** The reader loop; returns when the connection is closed, after the session is closed. */
    void run(SessionFactory sessions) {
        ChannelSession session = null;
        reader = Thread.currentThread();
        try {
            switch (sessions.open(this, peer())) {
                case OpenResult.Opened o -> session = o.session();
                case OpenResult.Refused r -> {
                    answerFirstFrame(r.code(), r.message());
                    return;
                }
            }
            writer = Thread.ofPlatform().daemon().name("orbitkv-conn-" + id + "-writer").start(this::writeCompletions);
            readLoop(session);
        } catch (IOException e) {
            if (!closed.get()) LOG.log(Level.FINE, "connection " + id + " ended: " + e);
        } catch (RuntimeException e) {
            metrics.internalErrors.increment();
            internalError("connection", "connection " + id + " failed", e);
        } finally {
            shutdown();
            leaveUnregistered();
            if (session != null) {
                try {
                    session.close();
                } catch (RuntimeException e) {
                    metrics.internalErrors.increment();
                    internalError("close", "connection " + id + ": session close failed", e);
                }
            }
            onExit.run();
        }
    }

    private void answerFirstFrame(ErrorCode code, String message) throws IOException {
        while (!closed.get()) {
            ByteBuffer filled = receive.duplicate().flip();
            switch (decoder.decode(filled)) {
                case DecodeResult.Decoded d -> {
                    writeFrame(d.requestId(), new Reply.Error(code, clip(message)));
                    return;
                }
                case DecodeResult.NeedBytes n -> {
                    if (!fill(n.bytes())) return;
                }
                case DecodeResult.Malformed m -> {
                    metrics.refused(m.code());
                    writeFrame(m.requestId(), new Reply.Error(m.code(), clip(m.message())));
                    return;
                }
            }
        }
    }

    private void readLoop(ChannelSession session) throws IOException {
        while (!closed.get()) {
            ByteBuffer filled = receive.duplicate().flip();
            switch (decoder.decode(filled)) {
                case DecodeResult.Decoded d -> {
                    consume(d.bytesConsumed());
                    metrics.framesIn.increment();
                    if (!serve(session, d)) return;
                }
                case DecodeResult.NeedBytes n -> {
                    if (!fill(n.bytes())) return;
                }
                case DecodeResult.Malformed m -> {
                    metrics.refused(m.code());
                    writeFrame(m.requestId(), new Reply.Error(m.code(), clip(m.message())));
                    if (!m.skippable() || m.code().closesConnection()) return;
                    consume(m.skipBytes());
                }
            }
        }
    }

    /** Handles one request and writes its reply; false if the connection must close. */
    private boolean serve(ChannelSession session, DecodeResult.Decoded d) throws IOException {
        writeLock.lock();
        try {
            inHandle = true;
        } finally {
            writeLock.unlock();
        }
        Reply reply = d.frame() instanceof Request request
                ? handleSafely(session, request)
                : new Reply.Error(ErrorCode.UNKNOWN_OPERATION, "not a request: " + d.frame().type());
        byte[] bytes = encodeReply(d.requestId(), reply);
        boolean timedOut;
        writeLock.lock();
        try {
            // Before the write: once the engine has read REGISTERED it may connect again at once,
            // and must not find this connection still holding an unregistered place.
            if (reply instanceof Reply.Registered) leaveUnregistered();
            // the reply and the events queued meanwhile (an inline restore's RESTORE_DONE) in one write
            writeWithCompletionsLocked(bytes);
            // The deadline fired while this request was in hand and it did not register: close now.
            timedOut = deadlinePassed && unregistered.get();
            if (timedOut) {
                metrics.registerTimeouts.increment();
                writeFrameLocked(FrameEncoder.toBytes(0, new Reply.Error(ErrorCode.REGISTER_TIMEOUT,
                        "not REGISTERED within the registration deadline")));
            }
        } finally {
            inHandle = false;
            handleDone.signalAll();
            writeLock.unlock();
        }
        return !timedOut && !(reply instanceof Reply.Error e && e.code().closesConnection());
    }

    /** Writes every queued COMPLETION, oldest first; the caller holds {@link #writeLock}. */
    private void drainCompletionsLocked() throws IOException {
        writeWithCompletionsLocked(null);
    }

    /**
     * Writes {@code first} (a reply; null for none), then every queued COMPLETION, oldest first,
     * in one gathering write: a reply and the event right behind it cost one system call and
     * reach the client in one read. At most {@code outboundQueueFrames} + 1 frames. The caller
     * holds {@link #writeLock}.
     */
    private void writeWithCompletionsLocked(byte[] first) throws IOException {
        Reply.Completion event = outbound.poll();
        if (event == null) {
            if (first != null) writeFrameLocked(first);
            return;
        }
        List<ByteBuffer> frames = new ArrayList<>(outbound.size() + 2);
        if (first != null) frames.add(ByteBuffer.wrap(first));
        for (; event != null; event = outbound.poll()) frames.add(ByteBuffer.wrap(FrameEncoder.toBytes(0, event)));
        ByteBuffer[] buffers = frames.toArray(ByteBuffer[]::new);
        ByteBuffer last = buffers[buffers.length - 1]; // a blocking channel writes the buffers in order
        while (last.hasRemaining()) channel.write(buffers);
        metrics.framesOut.increment(buffers.length);
    }

    /** A bug seen on this connection: counted by the caller, logged rate-limited (a report with it helps). */
    private static void internalError(String kind, String message, RuntimeException e) {
        StackTraceElement[] frames = e.getStackTrace();
        INTERNAL.log(System.Logger.Level.ERROR, kind, message + ": " + e + (frames.length > 0 ? " (at " + frames[0] + ")" : "")
                + "; the client got INTERNAL and the Manager keeps serving; please report it with the DEBUG log");
        LOG.log(Level.FINE, message, e);
    }

    private Reply handleSafely(ChannelSession session, Request request) {
        try {
            return session.handle(request);
        } catch (RuntimeException e) {
            metrics.internalErrors.increment();
            internalError(request.type().toString(), "connection " + id + ": " + request.type() + " failed inside the Manager", e);
            return new Reply.Error(ErrorCode.INTERNAL, clip("internal error: " + e.getClass().getSimpleName()));
        }
    }

    private byte[] encodeReply(long requestId, Reply reply) {
        try {
            return FrameEncoder.toBytes(requestId, reply);
        } catch (IllegalArgumentException e) {
            metrics.internalErrors.increment();
            internalError("encode", "connection " + id + ": unencodable reply " + reply.type(), e);
            return FrameEncoder.toBytes(requestId, new Reply.Error(ErrorCode.INTERNAL, "internal error: bad reply"));
        }
    }

    /** Drops {@code bytes} from the front of the receive buffer. */
    private void consume(int bytes) {
        receive.flip();
        receive.position(bytes);
        receive.compact();
    }

    /** Reads until {@code more} further bytes are buffered; false at end of stream. */
    private boolean fill(int more) throws IOException {
        int needed = receive.position() + more;
        if (needed > receive.capacity()) {
            ByteBuffer bigger = ByteBuffer.allocate(Math.min(Math.max(needed, receive.capacity() * 2),
                    decoder.limits().maxFrameBytes()));
            receive.flip();
            bigger.put(receive);
            receive = bigger;
        }
        while (receive.position() < needed) {
            int n = channel.read(receive);
            if (n > 0 && !heard) heard = true;
            if (n < 0) {
                if (receive.position() > 0) {
                    metrics.truncatedAtClose.increment();
                    LOG.fine(() -> "connection " + id + " closed inside a frame (" + receive.position() + " bytes)");
                }
                return false;
            }
        }
        return true;
    }

    /**
     * Writer thread: COMPLETION frames in queue order, never inside a request's handling. Woken
     * by a permit per queued event; it polls under {@link #writeLock} like the reader does after
     * each reply, so the two never reorder events.
     */
    private void writeCompletions() {
        try {
            while (!closed.get()) {
                queued.acquire();
                writeLock.lock();
                try {
                    while (inHandle && !closed.get()) handleDone.await();
                    drainCompletionsLocked();
                } finally {
                    writeLock.unlock();
                }
            }
        } catch (InterruptedException | IOException e) {
            // closed: the reader's finally ends the session
        } finally {
            shutdown();
        }
    }

    @Override
    public boolean complete(Reply.Completion event) {
        if (closed.get()) return false;
        if (outbound.offer(event)) {
            // Offered by the reader itself (inside handle: an inline restore): serve() writes it
            // after the reply, so waking the writer would only cost a thread switch.
            if (Thread.currentThread() != reader) queued.release();
            return true;
        }
        metrics.completionsDropped.increment();
        return false;
    }

    @Override
    public void fence(ErrorCode code, String message) {
        Thread.ofVirtual().name("orbitkv-conn-" + id + "-fence").start(() -> sendAndClose(code, message));
    }

    /** Best effort: one ERROR frame (request id 0), then close; never blocks the caller past the write. */
    void sendAndClose(ErrorCode code, String message) {
        if (!closed.get()) {
            try {
                if (writeLock.tryLock(100, TimeUnit.MILLISECONDS)) {
                    try {
                        writeFrameLocked(FrameEncoder.toBytes(0, new Reply.Error(code, clip(message))));
                    } finally {
                        writeLock.unlock();
                    }
                }
            } catch (IOException | InterruptedException e) {
                LOG.fine(() -> "connection " + id + ": could not send " + code + ": " + e);
            }
        }
        shutdown();
    }

    private void writeFrame(long requestId, Reply reply) throws IOException {
        write(FrameEncoder.toBytes(requestId, reply));
    }

    private void write(byte[] frame) throws IOException {
        writeLock.lock();
        try {
            writeFrameLocked(frame);
        } finally {
            writeLock.unlock();
        }
    }

    private void writeFrameLocked(byte[] frame) throws IOException {
        ByteBuffer buf = ByteBuffer.wrap(frame);
        while (buf.hasRemaining()) channel.write(buf);
        metrics.framesOut.increment();
    }

    /** Closes the socket once (unblocking the reader and writer); idempotent, any thread. */
    void shutdown() {
        if (!closed.compareAndSet(false, true)) return;
        try {
            channel.close();
        } catch (IOException e) {
            LOG.fine(() -> "connection " + id + ": close failed: " + e);
        }
        Thread w = writer;
        if (w != null) w.interrupt();
        writeLock.lock();
        try {
            handleDone.signalAll();
        } finally {
            writeLock.unlock();
        }
    }

    private String clip(String message) {
        int max = decoder.limits().maxStringBytes();
        if (message.length() * 3 <= max) return message;
        String cut = message;
        while (cut.getBytes(java.nio.charset.StandardCharsets.UTF_8).length > max) {
            cut = cut.substring(0, cut.length() / 2);
        }
        return cut;
    }
}
