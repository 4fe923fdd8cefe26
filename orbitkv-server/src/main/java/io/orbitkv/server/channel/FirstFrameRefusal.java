package io.orbitkv.server.channel;

import io.orbitkv.state.protocol.DecodeResult;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.FrameDecoder;
import io.orbitkv.state.protocol.FrameEncoder;
import io.orbitkv.state.protocol.Reply;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.SocketChannel;
import java.util.logging.Logger;

/**
 * An engine-channel connection that gets no place (over {@code maxConnections} or the
 * unregistered limits): its first frame is read whole and answered ERROR BUSY under that frame's
 * request id, then the connection is closed cleanly (protocol §9.1).
 *
 * <p>Owns the socket until it is closed. Thread model: {@link #run} on its own virtual thread;
 * {@link #deadlinePassed}, {@link #displace} and {@link #shutDown} from any thread. Invariants: at
 * most one answer is written ({@link #answer} under the monitor); the frame is read whole before
 * the answer, at most {@code maxFrameBytes} (the decoder refuses a longer length from the header);
 * a connection that sent no whole header by the registration deadline gets ERROR REGISTER_TIMEOUT
 * under request id 0, as an admitted one does, and one displaced earlier by a newcomer ERROR BUSY
 * under request id 0; neither had sent a frame to answer.
 *
 * <p>Design note: the whole frame is read, not just its header, because closing a socket with
 * unread bytes resets it, and the client, still writing its REGISTER, would see the reset before
 * the answer. A refusal costs a virtual thread (parked in {@code read}, ~1 KiB) and a 16-byte
 * header buffer; the body is discarded through a 4 KiB buffer. Virtual threads, unlike the
 * sessions' platform threads: a refusal's latency does not matter, its count might.
 */
final class FirstFrameRefusal {

    private static final Logger LOG = Logger.getLogger(FirstFrameRefusal.class.getName());
    private static final int DISCARD_BYTES = 4096;

    private final long id;
    private final SocketChannel channel;
    private final FrameDecoder decoder;
    private final ErrorCode code;
    private final String message;
    private final ChannelMetrics metrics;
    /** When the connection was accepted ({@link System#nanoTime}). */
    private final long acceptedAtNanos = System.nanoTime();
    /** Set once a byte arrived: from then on a newcomer cannot displace it. */
    private volatile boolean heard;
    private volatile boolean timedOut;
    /** Guarded by {@code this}. */
    private boolean answered;

    FirstFrameRefusal(long id, SocketChannel channel, FrameDecoder decoder, ErrorCode code, String message,
                      ChannelMetrics metrics) {
        this.id = id;
        this.channel = channel;
        this.decoder = decoder;
        this.code = code;
        this.message = message;
        this.metrics = metrics;
    }

    long id() {
        return id;
    }

    /** Reads the first frame and answers it; returns after the connection is closed. */
    void run() {
        try {
            ByteBuffer header = ByteBuffer.allocate(io.orbitkv.state.protocol.FrameLayout.HEADER_BYTES);
            while (header.hasRemaining()) {
                int n = channel.read(header);
                if (n > 0) heard = true;
                if (n < 0) {
                    if (timedOut) {
                        metrics.registerTimeouts.increment();
                        answer(0, ErrorCode.REGISTER_TIMEOUT, "not REGISTERED within the registration deadline");
                    }
                    return;
                }
            }
            switch (decoder.decode(header.duplicate().flip())) {
                case DecodeResult.Decoded d -> answer(d.requestId(), code, message);
                case DecodeResult.NeedBytes n -> {
                    long requestId = header.duplicate().order(ByteOrder.LITTLE_ENDIAN).getLong(8);
                    discard(n.bytes());
                    answer(requestId, code, message);
                }
                case DecodeResult.Malformed m -> {
                    metrics.refused(m.code());
                    answer(m.requestId(), m.code(), m.message());
                }
            }
        } catch (IOException e) {
            LOG.fine(() -> "refused connection " + id + " ended: " + e);
        } finally {
            close();
        }
    }

    /** Reads and drops {@code bytes} (the rest of the frame); stops early at end of stream. */
    private void discard(int bytes) throws IOException {
        ByteBuffer sink = ByteBuffer.allocate(Math.min(bytes, DISCARD_BYTES));
        for (int left = bytes; left > 0; ) {
            sink.clear().limit(Math.min(left, sink.capacity()));
            int n = channel.read(sink);
            if (n < 0) return;
            left -= n;
        }
    }

    /** True if no byte has arrived in the {@code graceNanos} since the connection was accepted. */
    boolean silentFor(long graceNanos, long nowNanos) {
        return !heard && nowNanos - acceptedAtNanos >= graceNanos;
    }

    /** A newcomer took this silent connection's place: ERROR BUSY under request id 0, then close. Any thread. */
    void displace(String text) {
        try {
            answer(0, ErrorCode.BUSY, text);
        } catch (IOException e) {
            LOG.fine(() -> "refused connection " + id + ": " + e);
        }
        close();
    }

    /** The registration deadline passed: the blocked read ends as at end of stream. Any thread. */
    void deadlinePassed() {
        timedOut = true;
        try {
            channel.shutdownInput();
        } catch (IOException e) {
            LOG.fine(() -> "refused connection " + id + ": " + e);
        }
    }

    /** The Manager is closing: ERROR SHUTTING_DOWN under request id 0 unless answered already, then close. */
    void shutDown() {
        try {
            answer(0, ErrorCode.SHUTTING_DOWN, "the Manager is shutting down");
        } catch (IOException e) {
            LOG.fine(() -> "refused connection " + id + ": " + e);
        }
        close();
    }

    private synchronized void answer(long requestId, ErrorCode answerCode, String text) throws IOException {
        if (answered || !channel.isOpen()) return;
        answered = true;
        ByteBuffer frame = ByteBuffer.wrap(FrameEncoder.toBytes(requestId, new Reply.Error(answerCode, text)));
        while (frame.hasRemaining()) channel.write(frame);
        metrics.framesOut.increment();
        channel.shutdownOutput(); // the client reads the answer, then a clean end of stream
    }

    private void close() {
        try {
            channel.close();
        } catch (IOException e) {
            LOG.fine(() -> "refused connection " + id + ": close failed: " + e);
        }
    }
}
