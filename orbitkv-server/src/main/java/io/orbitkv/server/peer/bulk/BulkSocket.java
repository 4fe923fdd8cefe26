package io.orbitkv.server.peer.bulk;

import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.util.Optional;

/**
 * One bulk connection's byte stream: plain TCP (a blocking {@link SocketChannel}: reads land
 * straight in the caller's buffer, a reserved slot's view included, and writes gather straight
 * from pinned slots, so no user-space copy) or TLS over the same channel (an {@link SSLSocket};
 * encryption is a copy by nature, so bytes go through one 256 KiB staging array each way).
 *
 * <p>Owned by one connection; used by one thread at a time (the connection's thread), except
 * {@link #close()}, which any thread may call to unblock it (a member left, a deadline passed).
 */
sealed interface BulkSocket extends AutoCloseable permits BulkSocket.Plain, BulkSocket.Tls {

    /** Staging array of the TLS path. */
    int TLS_STAGING_BYTES = 256 << 10;

    /** Fills {@code dst} from position to limit, or throws ({@link EOFException} at end of stream). */
    void readFully(ByteBuffer dst) throws IOException;

    /** Writes every byte of {@code srcs}, in order. */
    void write(ByteBuffer... srcs) throws IOException;

    /** Closes the connection; idempotent, and unblocks a thread reading or writing it. */
    @Override
    void close();

    /** Opens a connection to {@code address}, over TLS when {@code tls} is present (client mode, hostname checked). */
    static BulkSocket connect(InetSocketAddress address, Optional<SSLContext> tls, int timeoutMillis) throws IOException {
        SocketChannel ch = SocketChannel.open();
        try {
            tune(ch);
            // an endpoint learnt from a peer is unresolved: resolve here, on the connection's own thread
            InetSocketAddress resolved = address.isUnresolved() ? new InetSocketAddress(address.getHostString(), address.getPort())
                    : address;
            ch.socket().connect(resolved, timeoutMillis);
            if (tls.isEmpty()) return new Plain(ch);
            SSLSocket s = (SSLSocket) tls.get().getSocketFactory().createSocket(ch.socket(), address.getHostString(),
                    address.getPort(), true);
            s.setUseClientMode(true);
            SSLParameters p = s.getSSLParameters();
            p.setEndpointIdentificationAlgorithm("HTTPS");
            s.setSSLParameters(p);
            s.setSoTimeout(timeoutMillis);
            s.startHandshake();
            s.setSoTimeout(0);
            return new Tls(ch, s);
        } catch (IOException | RuntimeException e) {
            ch.close();
            throw e;
        }
    }

    /** Wraps an accepted channel, over TLS (server mode, client certificate required) when {@code tls} is present. */
    static BulkSocket accepted(SocketChannel ch, Optional<SSLContext> tls, int timeoutMillis) throws IOException {
        try {
            tune(ch);
            if (tls.isEmpty()) return new Plain(ch);
            InetSocketAddress remote = (InetSocketAddress) ch.getRemoteAddress();
            SSLSocket s = (SSLSocket) tls.get().getSocketFactory().createSocket(ch.socket(), remote.getHostString(),
                    remote.getPort(), true);
            s.setUseClientMode(false);
            s.setNeedClientAuth(true);
            s.setSoTimeout(timeoutMillis);
            s.startHandshake();
            s.setSoTimeout(0);
            return new Tls(ch, s);
        } catch (IOException | RuntimeException e) {
            ch.close();
            throw e;
        }
    }

    /**
     * Blocking, no Nagle. Socket buffer sizes are left to the kernel on purpose: setting
     * SO_RCVBUF/SO_SNDBUF turns TCP autotuning off and is capped by {@code net.core.rmem_max}
     * (208 KiB on a stock kernel, under one 2 MiB page), while autotuning grows to
     * {@code tcp_rmem}'s maximum (6–32 MiB) on a fast path.
     */
    private static void tune(SocketChannel ch) throws IOException {
        ch.configureBlocking(true);
        ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
    }

    /** Plain TCP: the kernel copies straight between the socket and the caller's buffers. */
    final class Plain implements BulkSocket {
        private final SocketChannel ch;

        Plain(SocketChannel ch) {
            this.ch = ch;
        }

        @Override
        public void readFully(ByteBuffer dst) throws IOException {
            while (dst.hasRemaining()) {
                if (ch.read(dst) < 0) throw new EOFException("connection closed by peer");
            }
        }

        @Override
        public void write(ByteBuffer... srcs) throws IOException {
            long left = 0;
            for (ByteBuffer b : srcs) left += b.remaining();
            while (left > 0) left -= ch.write(srcs);
        }

        @Override
        public void close() {
            try {
                ch.close();
            } catch (IOException e) {
                // closing: nothing more to do with this connection
            }
        }
    }

    /** TLS: one staging copy each way (the cipher reads and writes arrays). */
    final class Tls implements BulkSocket {
        private final SocketChannel ch;
        private final SSLSocket socket;
        private final InputStream in;
        private final OutputStream out;
        private final byte[] readStaging = new byte[TLS_STAGING_BYTES];
        private final byte[] writeStaging = new byte[TLS_STAGING_BYTES];

        Tls(SocketChannel ch, SSLSocket socket) throws IOException {
            this.ch = ch;
            this.socket = socket;
            this.in = socket.getInputStream();
            this.out = socket.getOutputStream();
        }

        @Override
        public void readFully(ByteBuffer dst) throws IOException {
            while (dst.hasRemaining()) {
                int n;
                if (dst.hasArray()) {
                    n = in.read(dst.array(), dst.arrayOffset() + dst.position(), dst.remaining());
                    if (n > 0) dst.position(dst.position() + n);
                } else {
                    n = in.read(readStaging, 0, Math.min(readStaging.length, dst.remaining()));
                    if (n > 0) dst.put(readStaging, 0, n);
                }
                if (n < 0) throw new EOFException("connection closed by peer");
            }
        }

        @Override
        public void write(ByteBuffer... srcs) throws IOException {
            for (ByteBuffer b : srcs) {
                if (b.hasArray()) {
                    out.write(b.array(), b.arrayOffset() + b.position(), b.remaining());
                    b.position(b.limit());
                } else {
                    while (b.hasRemaining()) {
                        int n = Math.min(writeStaging.length, b.remaining());
                        b.get(writeStaging, 0, n);
                        out.write(writeStaging, 0, n);
                    }
                }
            }
            out.flush();
        }

        /** Closes the channel first: that unblocks a reader at once, and the TLS close then cannot wait on a stuck peer. */
        @Override
        public void close() {
            try {
                ch.close();
            } catch (IOException e) {
                // closing anyway below
            }
            try {
                socket.close();
            } catch (IOException e) {
                // closing: nothing more to do with this connection
            }
        }
    }
}
