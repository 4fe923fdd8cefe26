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
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;

/**
 * One engine-channel connection: the Unix socket, the request-id counter, the table of requests
 * awaiting their reply, and the single reader thread that decodes what the Manager sends.
 *
 * <p>Thread model: {@link #send} may be called from any thread; each frame is encoded whole and
 * written under {@code writeLock}, so frames of two threads never interleave (protocol.md 2,
 * publication rule) and requests may be pipelined. The reader thread alone reads the socket; it
 * completes the reply's future by request id and hands every reply (before completing it) and
 * every COMPLETION to {@code onFrame}, in arrival order, so a listener sees a reply before any
 * COMPLETION it started (protocol.md 9.3). Dependent stages attached to a returned future
 * without {@code *Async} run on the reader thread and must be short.
 *
 * <p>Invariants: {@code pending} holds only requests written and not yet answered, so it is
 * bounded by what the caller has in flight; once the channel has failed ({@code failure} set),
 * every pending and every later request completes exceptionally with that failure.
 *
 * <p>Design note: replies are routed by request id through a map rather than a FIFO, although
 * the Manager answers in order, because a map survives a caller that abandons a future and it
 * is what the protocol promises (same id); one reader thread, not a selector, since a client has
 * one connection and the thread blocks in {@code read} at no cost. The receive buffer is sized
 * to {@code maxFrameBytes} (4 MiB by default) once: no frame can be larger.
 */
final class FrameChannel implements AutoCloseable {

    private final SocketChannel socket;
    private final FrameDecoder decoder = new FrameDecoder(ProtocolLimits.DEFAULTS, Direction.TO_CLIENT);
    private final Object writeLock = new Object();
    private final AtomicLong nextRequestId = new AtomicLong(1);
    private final Map<Long, CompletableFuture<Reply>> pending = new ConcurrentHashMap<>();
    private final AtomicReference<RuntimeException> failure = new AtomicReference<>();
    private final Consumer<Reply> onFrame;
    private final Consumer<RuntimeException> onFailure;
    private final Thread reader;

    private FrameChannel(SocketChannel socket, Consumer<Reply> onFrame, Consumer<RuntimeException> onFailure) {
        this.socket = socket;
        this.onFrame = onFrame;
        this.onFailure = onFailure;
        this.reader = Thread.ofPlatform().daemon().name("orbitkv-client-reader").unstarted(this::readLoop);
    }

    /**
     * Connects to the Manager's socket and starts the reader thread. {@code onFrame} sees every
     * reply and COMPLETION on the reader thread; {@code onFailure} is called once, when the
     * connection ends for any reason, with the cause every pending request fails with.
     */
    static FrameChannel open(Path socketPath, Consumer<Reply> onFrame, Consumer<RuntimeException> onFailure)
            throws IOException {
        SocketChannel socket = SocketChannel.open(StandardProtocolFamily.UNIX);
        try {
            socket.connect(UnixDomainSocketAddress.of(socketPath));
        } catch (IOException e) {
            socket.close();
            throw e;
        }
        FrameChannel channel = new FrameChannel(socket, onFrame, onFailure);
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
                while (out.hasRemaining()) socket.write(out);
            }
        } catch (IOException e) {
            fail(new UncheckedIOException("writing " + request.type() + " failed", e));
        }
        return reply;
    }

    /** The failure that ended the channel, if it has ended. */
    RuntimeException failure() {
        return failure.get();
    }

    private void readLoop() {
        ByteBuffer in = ByteBuffer.allocate(decoder.limits().maxFrameBytes());
        try {
            while (true) {
                if (socket.read(in) < 0) throw new EOFException("the Manager closed the connection");
                in.flip();
                drain(in);
                in.compact();
            }
        } catch (IOException e) {
            fail(new UncheckedIOException(failure.get() == null ? "connection lost" : "connection closed", e));
        } catch (RuntimeException e) {
            fail(e);
        }
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
