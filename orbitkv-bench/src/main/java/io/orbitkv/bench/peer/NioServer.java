package io.orbitkv.bench.peer;

import io.orbitkv.bench.peer.PeerReadBench.Page;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.ArrayList;
import java.util.List;

import static io.orbitkv.bench.peer.PeerReadBench.MAX_THREADS;
import static io.orbitkv.bench.peer.PeerReadBench.SIZES;

/**
 * The {@code nio} baseline of {@link PeerReadBench}, the floor any TCP transport pays: a raw
 * Java NIO stream over loopback whose request is a page number (4 bytes) and whose reply is the
 * payload written from a direct buffer and read into one.
 *
 * <p>Thread model: one server thread per accepted connection; connection and buffer
 * {@code thread} of the client side are used only by benchmark thread {@code thread}.
 */
final class NioServer implements AutoCloseable {
    final ServerSocketChannel server;
    final List<List<ByteBuffer>> payloads = new ArrayList<>();
    final SocketChannel[] conns = new SocketChannel[MAX_THREADS];
    final ByteBuffer[] into = new ByteBuffer[MAX_THREADS];
    final Thread acceptor;

    NioServer(List<List<Page>> pages) throws IOException {
        for (List<Page> set : pages) {
            List<ByteBuffer> bufs = new ArrayList<>();
            for (Page p : set) bufs.add(ByteBuffer.allocateDirect(p.bytes().length).put(p.bytes()).flip());
            payloads.add(bufs);
        }
        server = ServerSocketChannel.open().bind(new InetSocketAddress("127.0.0.1", 0));
        acceptor = Thread.ofPlatform().daemon().start(() -> {
            try {
                while (true) {
                    SocketChannel c = server.accept();
                    c.socket().setTcpNoDelay(true);
                    Thread.ofPlatform().daemon().start(() -> serve(c));
                }
            } catch (IOException closed) {
                // server closed
            }
        });
    }

    void serve(SocketChannel c) {
        ByteBuffer req = ByteBuffer.allocate(4);
        try (c) {
            while (true) {
                req.clear();
                while (req.hasRemaining()) if (c.read(req) < 0) return;
                int code = req.flip().getInt();
                ByteBuffer payload = payloads.get(code >>> 16).get(code & 0xffff).duplicate();
                while (payload.hasRemaining()) c.write(payload);
            }
        } catch (IOException e) {
            // connection closed
        }
    }

    SocketChannel conn(int thread) throws IOException {
        if (conns[thread] == null) {
            conns[thread] = SocketChannel.open(server.getLocalAddress());
            conns[thread].socket().setTcpNoDelay(true);
            into[thread] = ByteBuffer.allocateDirect(SIZES[1]);
        }
        return conns[thread];
    }

    long get(int thread, int size, int i) throws IOException {
        SocketChannel c = conn(thread);
        ByteBuffer req = ByteBuffer.allocate(4).putInt(size << 16 | i).flip();
        while (req.hasRemaining()) c.write(req);
        ByteBuffer dst = into[thread].clear().limit(SIZES[size]);
        while (dst.hasRemaining()) if (c.read(dst) < 0) throw new IOException("closed");
        return SIZES[size];
    }

    /** {@code n} pipelined requests (pages 0..n-1), then their {@code n} payloads. */
    long getAll(int thread, int size, int n) throws IOException {
        SocketChannel c = conn(thread);
        ByteBuffer req = ByteBuffer.allocate(4 * n);
        for (int i = 0; i < n; i++) req.putInt(size << 16 | i);
        req.flip();
        while (req.hasRemaining()) c.write(req);
        for (int i = 0; i < n; i++) {
            ByteBuffer dst = into[thread].clear().limit(SIZES[size]);
            while (dst.hasRemaining()) if (c.read(dst) < 0) throw new IOException("closed");
        }
        return (long) n * SIZES[size];
    }

    @Override
    public void close() throws IOException {
        for (SocketChannel c : conns) if (c != null) c.close();
        server.close();
    }
}
