package io.orbitkv.server.channel;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.fd.Posix;
import io.orbitkv.state.protocol.DescriptorExchange;
import io.orbitkv.state.protocol.DescriptorTicket;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.unix.UnixSocket;
import java.io.IOException;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.UserPrincipal;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The descriptor socket against clients written from protocol §6.11 alone: every request is
 * answered (a short or a long one MALFORMED, after it was read whole), a ticket is judged when
 * its connection arrived, and a newcomer fetches its descriptors within 2 s under a flood of
 * silent connections, of its own uid or of another.
 */
@SuppressWarnings("try") // a flood runs, unreferenced, while the newcomer tries
class DescriptorServerTest {

    @TempDir
    Path dir;

    private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
    private final AtomicLong nowNanos = new AtomicLong();
    private final AtomicInteger clockReads = new AtomicInteger();
    private DescriptorServer server;
    private int arena = -1;

    @BeforeEach
    void start() throws IOException {
        assumeTrue(UnixSocket.supported());
        server = DescriptorServer.start(new DescriptorServer.Settings(dir.resolve("m.sock.fd"), "0600", 16,
                DescriptorServer.Settings.DEFAULT_TICKET_TTL, DescriptorServer.Settings.DEFAULT_EXCHANGE_TIMEOUT),
                registry, () -> {
                    clockReads.incrementAndGet();
                    return nowNanos.get();
                });
        arena = UnixSocket.memfd("arena", 4096);
        assertThat(arena).isNotNegative();
    }

    @AfterEach
    void stop() {
        if (server != null) server.close();
        if (arena >= 0) Posix.close(arena);
    }

    private DescriptorTicket offer() throws IOException {
        UserPrincipal me = Files.getOwner(Files.writeString(dir.resolve("mine"), "x"));
        return server.offerArenas(new Object(), new int[] {arena}, Optional.of(me)).orElseThrow();
    }

    private SocketChannel connect() throws IOException {
        return SocketChannel.open(UnixDomainSocketAddress.of(Path.of(server.socketPath())));
    }

    /** Reads the whole 24-byte reply (no descriptor expected), then asserts a clean end of stream. */
    private static DescriptorExchange.ExchangeReply replyThenEnd(SocketChannel c) throws IOException {
        ByteBuffer reply = ByteBuffer.allocate(DescriptorExchange.MESSAGE_BYTES + 1);
        while (reply.position() < DescriptorExchange.MESSAGE_BYTES) {
            assertThat(c.read(reply)).as("the reply arrives before the end of the stream").isPositive();
        }
        assertThat(c.read(reply)).as("nothing after the reply, then a clean end").isEqualTo(-1);
        return DescriptorExchange.decodeReply(Arrays.copyOf(reply.array(), DescriptorExchange.MESSAGE_BYTES));
    }

    @Test
    void aRequestShorterThan24BytesThenTheEndOfTheStreamIsAnsweredMalformed() throws IOException {
        try (SocketChannel c = connect()) {
            c.write(ByteBuffer.wrap(Arrays.copyOf(DescriptorExchange.arenasRequest(DescriptorTicket.random()), 10)));
            c.shutdownOutput();
            assertThat(replyThenEnd(c).errorCode()).isEqualTo(ErrorCode.MALFORMED.code());
        }
    }

    @Test
    void aRequestLongerThan24BytesIsReadWholeAndAnsweredMalformedWithoutAReset() throws IOException {
        byte[] longer = Arrays.copyOf(DescriptorExchange.arenasRequest(DescriptorTicket.random()), 2000);
        for (int i = 0; i < 20; i++) {
            try (SocketChannel c = connect()) {
                c.write(ByteBuffer.wrap(longer));
                assertThat(replyThenEnd(c).errorCode()).as("attempt %d", i).isEqualTo(ErrorCode.MALFORMED.code());
            }
        }
        assertThat(registry.get("orbitkv.manager.descriptor.refusals").tag("reason", "malformed").counter().count())
                .isEqualTo(20);
    }

    @Test
    void aTicketIsJudgedWhenItsConnectionArrivedNotWhenItsRequestWasRead() throws Exception {
        long ttl = DescriptorServer.Settings.DEFAULT_TICKET_TTL.toNanos();
        DescriptorTicket ticket = offer(); // at 0: expires at 5 s
        int before = clockReads.get();
        nowNanos.set(ttl - 1_000_000);
        Fetch f = Fetch.connect(server.socketPath()); // arrives 1 ms before the expiry
        await("the Manager notes the arrival").atMost(Duration.ofSeconds(2)).until(() -> clockReads.get() > before);
        nowNanos.set(ttl + 499_000_000); // its request is read 0.5 s later, past the expiry
        assertThat(f.request(ticket)).as("granted: it arrived before its ticket expired").isEqualTo(1);
    }

    /** One ARENAS fetch on a raw socket, as a client does. */
    private record Fetch(int fd) {
        static Fetch connect(String path) {
            int fd = UnixSocket.open();
            assertThat(fd).isNotNegative();
            assertThat(UnixSocket.connect(fd, path)).isZero();
            assertThat(UnixSocket.setTimeouts(fd, 5_000)).isZero();
            return new Fetch(fd);
        }

        /** Sends the ticket; the number of descriptors granted, or -1 for a refusal or no answer. Closes. */
        int request(DescriptorTicket ticket) {
            List<Integer> fds = new ArrayList<>();
            try {
                byte[] req = DescriptorExchange.arenasRequest(ticket);
                if (UnixSocket.send(fd, req, new int[0]) != req.length) return -1;
                byte[] reply = new byte[DescriptorExchange.MESSAGE_BYTES];
                int have = 0;
                while (have < reply.length) {
                    long n = UnixSocket.receive(fd, reply, have, reply.length - have, 8, fds);
                    if (n <= 0) return -1;
                    have += (int) n;
                }
                return DescriptorExchange.decodeReply(reply).errorCode() == 0 ? fds.size() : -1;
            } finally {
                for (int f : fds) Posix.close(f);
                UnixSocket.close(fd);
            }
        }
    }

    /**
     * A newcomer fetches with a fresh ticket each attempt (as an engine that re-registers does),
     * retrying every 0.5 s, under a flood of 100 silent connections; the time to its first success.
     */
    private long newcomerUnder(SilentFlood.Opener flood, String of) throws Exception {
        Path socket = Path.of(server.socketPath());
        try (SilentFlood f = flood.open(socket)) {
            long took = Newcomer.nanosToSuccess(() -> {
                nowNanos.set(System.nanoTime());
                DescriptorTicket ticket = offer();
                return Fetch.connect(server.socketPath()).request(ticket) == 1;
            }, Duration.ofSeconds(5));
            System.out.printf("descriptor socket, 100 silent connections of %s: newcomer served in %d ms"
                    + " (%.0f displaced, %.0f dropped so far)%n", of, took / 1_000_000,
                    registry.get("orbitkv.manager.descriptor.displaced.connections").counter().count(),
                    registry.get("orbitkv.manager.descriptor.dropped.connections").counter().count());
            return took;
        }
    }

    @Test
    void underAFloodOfSilentConnectionsOfItsOwnUidANewcomerGetsItsDescriptorsWithin2Seconds() throws Exception {
        assertThat(newcomerUnder(socket -> {
            SilentFlood flood = SilentFlood.inProcess(socket, 100);
            // the flood is served and reopened: some of it has been closed and replaced
            await().atMost(Duration.ofSeconds(10)).until(() -> flood.opened() > 100);
            return flood;
        }, "the same uid")).as("a newcomer of the flooding uid is served within 2 s").isLessThan(2_000_000_000L);
    }

    @Test
    void underAFloodOfSilentConnectionsOfAnotherUidANewcomerGetsItsDescriptorsWithin2Seconds() throws Exception {
        assumeTrue(SilentFlood.nobodyAvailable(), "needs root, setpriv and /usr/bin/python3");
        assertThat(newcomerUnder(socket -> SilentFlood.asNobody(socket, 100), "uid 65534"))
                .as("a newcomer of another uid is served within 2 s").isLessThan(2_000_000_000L);
    }
}
