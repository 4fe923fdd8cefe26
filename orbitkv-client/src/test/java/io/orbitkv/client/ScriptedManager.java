package io.orbitkv.client;

import io.orbitkv.state.protocol.DecodeResult;
import io.orbitkv.state.protocol.Direction;
import io.orbitkv.state.protocol.FrameEncoder;
import io.orbitkv.state.protocol.FrameDecoder;
import io.orbitkv.state.protocol.ProtocolLimits;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A stand-in Manager for codec-level client tests: listens on a Unix socket, accepts one
 * connection, decodes each request with the real {@link FrameDecoder} and writes what the test's
 * {@link Script} answers (its reply first, then any COMPLETIONs), so tests drive the client
 * through exact frame sequences without a real Manager. Records every request it received.
 *
 * <p>Thread model: one accept-and-serve thread per instance; {@link #received} is safe to read
 * from the test thread.
 */
final class ScriptedManager implements AutoCloseable {

    /** One frame to write back: {@code requestId} 0 for COMPLETION (and unsolicited ERROR). */
    record Out(long requestId, Reply frame) {
    }

    /** The test's answer to each request; {@code requestId} is the request's. */
    interface Script {
        List<Out> answer(long requestId, Request request) throws Exception;
    }

    final Path socketPath;
    final List<Request> received = new CopyOnWriteArrayList<>();
    private final ServerSocketChannel server;
    private final Thread thread;
    private volatile SocketChannel connection;

    ScriptedManager(Path dir, Script script) throws IOException {
        socketPath = dir.resolve("manager.sock");
        server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        server.bind(UnixDomainSocketAddress.of(socketPath));
        thread = Thread.ofPlatform().daemon().name("scripted-manager").start(() -> serve(script));
    }

    private void serve(Script script) {
        FrameDecoder decoder = new FrameDecoder(ProtocolLimits.DEFAULTS, Direction.TO_MANAGER);
        ByteBuffer in = ByteBuffer.allocate(1 << 20);
        try (SocketChannel ch = server.accept()) {
            connection = ch;
            while (ch.read(in) >= 0) {
                in.flip();
                while (decoder.decode(in) instanceof DecodeResult.Decoded d) {
                    in.position(in.position() + d.bytesConsumed());
                    Request request = (Request) d.frame();
                    received.add(request);
                    ByteArrayOutputStream out = new ByteArrayOutputStream();
                    for (Out o : script.answer(d.requestId(), request)) out.write(FrameEncoder.toBytes(o.requestId(), o.frame()));
                    write(ch, out.toByteArray());
                }
                in.compact();
            }
        } catch (Exception e) {
            // the test closed the client or the server: nothing more to serve
        }
    }

    /** Writes frames outside any request (e.g. a late COMPLETION). */
    void push(Out... frames) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (Out o : frames) out.write(FrameEncoder.toBytes(o.requestId(), o.frame()));
        write(connection, out.toByteArray());
    }

    private static synchronized void write(SocketChannel ch, byte[] bytes) throws IOException {
        ByteBuffer b = ByteBuffer.wrap(bytes);
        while (b.hasRemaining()) ch.write(b);
    }

    @Override
    public void close() throws IOException {
        server.close();
        SocketChannel ch = connection;
        if (ch != null) ch.close();
        try {
            thread.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // close() keeps the interrupt for the caller
        }
    }
}
