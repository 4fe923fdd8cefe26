package io.orbitkv.server.channel;

import io.orbitkv.state.protocol.DecodeResult;
import io.orbitkv.state.protocol.Direction;
import io.orbitkv.state.protocol.FrameDecoder;
import io.orbitkv.state.protocol.FrameEncoder;
import io.orbitkv.state.protocol.ProtocolLimits;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import java.time.Duration;

/**
 * A test client speaking raw frames over a Unix socket: {@link #send} writes bytes as given
 * (valid or not), {@link #next} decodes the next frame the Manager sent, waiting at most a
 * deadline (a selector, never a sleep). Confined to the test thread.
 */
public final class RawClient implements AutoCloseable {

    /** What {@link #next} read: a frame with its request id, or the end of the stream. */
    public sealed interface Received {
    }

    public record Frame(long requestId, Reply reply) implements Received {
    }

    public record Closed() implements Received {
    }

    private static final Duration TIMEOUT = Duration.ofSeconds(20);
    private final SocketChannel channel;
    private final Selector selector;
    private final FrameDecoder decoder = new FrameDecoder(ProtocolLimits.DEFAULTS, Direction.TO_CLIENT);
    private ByteBuffer buffer = ByteBuffer.allocate(1 << 16);
    private long nextRequestId = 1;

    public RawClient(Path socket) throws IOException {
        channel = SocketChannel.open(UnixDomainSocketAddress.of(socket));
        channel.configureBlocking(false);
        selector = Selector.open();
        channel.register(selector, SelectionKey.OP_READ);
    }

    /** Sends {@code request} under a fresh request id and returns that id. */
    public long send(Request request) {
        long id = nextRequestId++;
        send(FrameEncoder.toBytes(id, request));
        return id;
    }

    /** Sends {@code request} and returns its reply (COMPLETION events before it are skipped). */
    public Reply call(Request request) {
        long id = send(request);
        Received r = next();
        while (r instanceof Frame f && f.reply() instanceof Reply.Completion) r = next();
        if (!(r instanceof Frame f) || f.requestId() != id) {
            throw new AssertionError("expected the reply to request " + id + ", got " + r);
        }
        return f.reply();
    }

    /** Writes {@code bytes} whole. */
    public void send(byte[] bytes) {
        try {
            ByteBuffer b = ByteBuffer.wrap(bytes);
            while (b.hasRemaining()) {
                if (channel.write(b) == 0) Thread.onSpinWait();
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The next frame, or {@link Closed} at end of stream; fails the test after 20 s. */
    public Received next() {
        long deadline = System.nanoTime() + TIMEOUT.toNanos();
        try {
            while (true) {
                DecodeResult r = decoder.decode(buffer.duplicate().flip());
                switch (r) {
                    case DecodeResult.Decoded d -> {
                        buffer.flip();
                        buffer.position(d.bytesConsumed());
                        buffer.compact();
                        return new Frame(d.requestId(), (Reply) d.frame());
                    }
                    case DecodeResult.Malformed m -> throw new AssertionError("the Manager sent a bad frame: " + m);
                    case DecodeResult.NeedBytes n -> {
                        if (buffer.remaining() < n.bytes()) {
                            ByteBuffer bigger = ByteBuffer.allocate(buffer.position() + n.bytes());
                            bigger.put(buffer.flip());
                            buffer = bigger;
                        }
                        long left = deadline - System.nanoTime();
                        if (left <= 0) throw new AssertionError("no frame within " + TIMEOUT);
                        selector.select(Math.max(1, left / 1_000_000));
                        selector.selectedKeys().clear();
                        int read;
                        try {
                            read = channel.read(buffer);
                        } catch (IOException e) {
                            return new Closed();
                        }
                        if (read < 0) {
                            if (buffer.position() > 0) throw new AssertionError("stream ended inside a frame");
                            return new Closed();
                        }
                    }
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    public void close() throws IOException {
        selector.close();
        channel.close();
    }
}
