package io.orbitkv.client;

import io.orbitkv.state.protocol.DescriptorExchange;
import io.orbitkv.state.protocol.DescriptorTicket;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.unix.UnixSocket;
import java.util.ArrayList;

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

    /** The ticket every scripted REGISTERED carries; the scripted descriptor socket redeems only it. */
    static final DescriptorTicket TICKET = DescriptorTicket.of(new byte[] {7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7});

    final Path socketPath;
    /** The scripted descriptor socket (protocol §6.11), beside the channel socket. */
    final Path descriptorSocket;
    final List<Request> received = new CopyOnWriteArrayList<>();
    /** Region descriptors clients handed over, in order (closed by {@link #close}). */
    final List<Integer> regionFds = new CopyOnWriteArrayList<>();
    private final ServerSocketChannel server;
    private final Thread thread;
    private final int descriptorListen;
    private final Thread descriptorThread;
    private volatile SocketChannel connection;
    private volatile int[] arenaFds = new int[0];
    private volatile boolean closing;

    ScriptedManager(Path dir, Script script) throws IOException {
        socketPath = dir.resolve("manager.sock");
        descriptorSocket = dir.resolve("manager.sock.fd").toAbsolutePath();
        server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        server.bind(UnixDomainSocketAddress.of(socketPath));
        descriptorListen = UnixSocket.open();
        if (UnixSocket.bind(descriptorListen, descriptorSocket.toString()) < 0 || UnixSocket.listen(descriptorListen, 8) < 0) {
            throw new IOException("cannot listen on " + descriptorSocket);
        }
        thread = Thread.ofPlatform().daemon().name("scripted-manager").start(() -> serve(script));
        descriptorThread = Thread.ofPlatform().daemon().name("scripted-descriptors").start(this::serveDescriptors);
    }

    /** The arena descriptors (the test's, borrowed) the descriptor socket hands out for {@link #TICKET}. */
    void arenas(int... fds) {
        arenaFds = fds.clone();
    }

    /** A REGISTERED with {@link #TICKET}, this manager's descriptor socket and {@code arenas}. */
    Reply.Registered registered(long incarnation, long epoch, List<Reply.ArenaFile> arenas) {
        return new Reply.Registered(incarnation, epoch, ProtocolLimits.DEFAULTS, TICKET, descriptorSocket.toString(), arenas);
    }

    /** Answers each descriptor connection as protocol §6.11 says; a region's handle is its index, little-endian. */
    private void serveDescriptors() {
        while (!closing) {
            int fd = UnixSocket.accept(descriptorListen);
            if (fd < 0) return;
            List<Integer> fds = new ArrayList<>();
            try {
                byte[] request = new byte[DescriptorExchange.MESSAGE_BYTES];
                int have = 0;
                while (have < request.length) {
                    long n = UnixSocket.receive(fd, request, have, request.length - have, 1, fds);
                    if (n <= 0) break;
                    have += (int) n;
                }
                byte[] reply;
                int[] send = new int[0];
                if (!(DescriptorExchange.decodeRequest(request) instanceof DescriptorExchange.DecodedRequest.Ok(var r))) {
                    reply = DescriptorExchange.errorReply(ErrorCode.MALFORMED);
                } else if (r.op() == DescriptorExchange.OP_REGION && fds.size() == 1) {
                    byte[] handle = new byte[DescriptorTicket.BYTES];
                    handle[0] = (byte) (regionFds.size() + 1);
                    regionFds.add(fds.removeFirst());
                    reply = DescriptorExchange.okReply(0, java.util.Optional.of(DescriptorTicket.of(handle)));
                } else if (r.op() == DescriptorExchange.OP_ARENAS && r.ticket().orElseThrow().equals(TICKET)) {
                    send = arenaFds;
                    reply = DescriptorExchange.okReply(send.length, java.util.Optional.empty());
                } else {
                    reply = DescriptorExchange.errorReply(ErrorCode.TICKET_REFUSED);
                }
                UnixSocket.send(fd, reply, send);
            } finally {
                for (int f : fds) UnixSocket.close(f);
                UnixSocket.close(fd);
            }
        }
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
        closing = true;
        UnixSocket.shutdown(descriptorListen);
        server.close();
        SocketChannel ch = connection;
        if (ch != null) ch.close();
        try {
            thread.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // close() keeps the interrupt for the caller
        }
        try {
            descriptorThread.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        UnixSocket.close(descriptorListen);
        java.nio.file.Files.deleteIfExists(descriptorSocket);
        for (int fd : regionFds) UnixSocket.close(fd);
    }
}
