package io.orbitkv.bench.manager;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The raw baseline of the QUERY round trip: a Unix domain socket server in the bench process that
 * answers every length-prefixed request with a reply of the length the request names (u32 at
 * byte 8, where the engine channel's request id sits), and a client that sends a fixed request
 * and reads the whole reply. Same framing as the engine channel (a little-endian u32 whole-frame
 * length first), same byte counts as the QUERY frame and its QUERY_RESULT, no decoding, no work.
 *
 * <p>Thread model: the server accepts on one virtual thread and serves each connection on its
 * own; a {@link Client} belongs to one thread. Buffers are allocated once per connection.
 */
final class UdsEcho implements AutoCloseable {

    /** Largest frame either side handles, in bytes (the engine channel's default maxFrameBytes). */
    static final int MAX_FRAME_BYTES = 4 << 20;

    private final Path path;
    private final ServerSocketChannel server;
    private final Thread acceptor;

    /** Binds {@code path} and starts answering. */
    UdsEcho(Path path) throws IOException {
        this.path = path;
        Files.deleteIfExists(path);
        this.server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        server.bind(UnixDomainSocketAddress.of(path));
        this.acceptor = Thread.ofVirtual().name("uds-echo-accept").start(this::accept);
    }

    /** A frame of {@code bytes} bytes (>= 12) holding its length at 0 and {@code replyBytes} at 8, little-endian. */
    static byte[] frame(int bytes, int replyBytes) {
        if (bytes < 12) throw new IllegalArgumentException("a frame needs >= 12 bytes: " + bytes);
        byte[] f = new byte[bytes];
        ByteBuffer.wrap(f).order(ByteOrder.LITTLE_ENDIAN).putInt(0, bytes).putInt(8, replyBytes);
        return f;
    }

    private void accept() {
        try {
            while (server.isOpen()) {
                SocketChannel c = server.accept();
                // a platform thread, as the Manager's connections have: a virtual one is woken through the
                // read poller and a carrier, which made the baseline slower than a raw echo is
                Thread.ofPlatform().daemon().name("uds-echo-conn").start(() -> serve(c));
            }
        } catch (IOException e) {
            // closed
        }
    }

    private void serve(SocketChannel c) {
        try (c) {
            ByteBuffer in = ByteBuffer.allocate(MAX_FRAME_BYTES).order(ByteOrder.LITTLE_ENDIAN);
            ByteBuffer out = ByteBuffer.allocate(MAX_FRAME_BYTES).order(ByteOrder.LITTLE_ENDIAN);
            while (true) {
                if (!readFrame(c, in)) return;
                int replyBytes = in.getInt(8);
                out.clear().putInt(0, replyBytes).limit(replyBytes);
                while (out.hasRemaining()) c.write(out);
            }
        } catch (IOException e) {
            // peer gone
        }
    }

    /** Reads one whole frame into {@code buf} (cleared first); false at end of stream. */
    static boolean readFrame(SocketChannel c, ByteBuffer buf) throws IOException {
        buf.clear().limit(4);
        while (buf.hasRemaining()) if (c.read(buf) < 0) return false;
        int length = buf.getInt(0);
        if (length < 4 || length > buf.capacity()) throw new IOException("bad frame length " + length);
        buf.limit(length);
        while (buf.hasRemaining()) if (c.read(buf) < 0) return false;
        return true;
    }

    /** A connection that sends a {@code requestBytes} frame and waits for a whole {@code replyBytes} reply. */
    Client connect(int requestBytes, int replyBytes) throws IOException {
        return new Client(SocketChannel.open(UnixDomainSocketAddress.of(path)), frame(requestBytes, replyBytes));
    }

    /** One client connection; one thread. */
    static final class Client implements AutoCloseable {
        private final SocketChannel channel;
        private final ByteBuffer request;
        private final ByteBuffer in = ByteBuffer.allocate(MAX_FRAME_BYTES).order(ByteOrder.LITTLE_ENDIAN);

        private Client(SocketChannel channel, byte[] request) {
            this.channel = channel;
            this.request = ByteBuffer.wrap(request);
        }

        /** One round trip; returns the reply's length in bytes. */
        int roundTrip() {
            try {
                request.clear();
                while (request.hasRemaining()) channel.write(request);
                if (!readFrame(channel, in)) throw new IOException("echo server closed");
                return in.limit();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        @Override
        public void close() throws IOException {
            channel.close();
        }
    }

    @Override
    public void close() throws IOException {
        server.close();
        acceptor.interrupt();
        Files.deleteIfExists(path);
    }
}
