package io.orbitkv.server.events;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;

/**
 * A TCP relay in front of a publisher's endpoint whose first accepted connection is held open
 * and silent, as a JeroMQ connection whose greeting stalls looks to the peer that waits on it;
 * every later connection is relayed byte for byte. Owns its listener, the sockets and one
 * platform thread per relayed direction; {@link #close} ends them all.
 */
final class StallingFirstConnection implements AutoCloseable {

    private final ServerSocket listener;
    private final int targetPort;
    private final List<Socket> sockets = new ArrayList<>();
    private final Thread acceptor;

    StallingFirstConnection(int targetPort) throws IOException {
        this.targetPort = targetPort;
        this.listener = new ServerSocket(0, 16, InetAddress.getLoopbackAddress());
        this.acceptor = Thread.ofPlatform().daemon().name("stalling-relay").start(this::accept);
    }

    /** The endpoint to connect to instead of the publisher's. */
    String endpoint() {
        return "tcp://127.0.0.1:" + listener.getLocalPort();
    }

    private void accept() {
        try {
            for (int n = 0; ; n++) {
                Socket in = listener.accept();
                synchronized (sockets) {
                    sockets.add(in);
                }
                if (n == 0) continue; // held: never read, never written
                Socket out = new Socket(InetAddress.getLoopbackAddress(), targetPort);
                synchronized (sockets) {
                    sockets.add(out);
                }
                pump(in, out);
                pump(out, in);
            }
        } catch (IOException closed) {
            // the listener was closed
        }
    }

    private static void pump(Socket from, Socket to) throws IOException {
        InputStream src = from.getInputStream();
        OutputStream dst = to.getOutputStream();
        Thread.ofPlatform().daemon().name("stalling-relay-pump").start(() -> {
            try {
                src.transferTo(dst);
            } catch (IOException closed) {
                // either side went away
            }
            try {
                to.shutdownOutput();
            } catch (IOException ignored) {
                // already closed
            }
        });
    }

    @Override
    public void close() throws IOException {
        listener.close();
        synchronized (sockets) {
            for (Socket s : sockets) s.close();
        }
    }
}
