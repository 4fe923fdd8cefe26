package io.orbitkv.client;

import io.orbitkv.state.protocol.DescriptorExchange;
import io.orbitkv.state.protocol.DescriptorTicket;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.unix.UnixSocket;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * The client's side of the Manager's descriptor socket (protocol §6.11): one connection per
 * exchange, one 24-byte request, one 24-byte reply with its descriptors, each call bounded by the
 * client's reply timeout. Stateless; any thread (the calls block it).
 *
 * <p>Failures: a refusal the Manager answered is an {@link OrbitKvException} with its code
 * (TICKET_REFUSED, MALFORMED, BUSY, UNSUPPORTED_VERSION); a transport failure (no socket, a
 * timeout, a reply that is not one) is an {@link IOException}. No descriptor leaks either way.
 */
public final class DescriptorSocket {

    private DescriptorSocket() {
    }

    /**
     * Redeems {@code ticket} at {@code socketPath}: exactly {@code expected} descriptors, in
     * arena-index order, now the caller's to map and close.
     */
    public static int[] fetchArenas(String socketPath, DescriptorTicket ticket, int expected, Duration timeout) throws IOException {
        if (expected > UnixSocket.MAX_DESCRIPTORS_PER_MESSAGE) {
            throw new IOException(expected + " arenas exceed the " + UnixSocket.MAX_DESCRIPTORS_PER_MESSAGE
                    + " descriptors one message carries");
        }
        List<Integer> fds = new ArrayList<>(expected);
        DescriptorExchange.ExchangeReply reply = exchange(socketPath, DescriptorExchange.arenasRequest(ticket), new int[0],
                expected, fds, timeout);
        if (reply.fdCount() != expected || fds.size() != expected) {
            for (int fd : fds) UnixSocket.close(fd);
            throw new IOException("the descriptor socket sent " + fds.size() + " descriptors (fd_count "
                    + reply.fdCount() + "), REGISTERED announced " + expected + " arenas");
        }
        return fds.stream().mapToInt(Integer::intValue).toArray();
    }

    /** Hands the region descriptor {@code fd} (still the caller's) to the Manager; the handle REGISTER_REGION names. */
    public static DescriptorTicket handOverRegion(String socketPath, int fd, Duration timeout) throws IOException {
        List<Integer> fds = new ArrayList<>(0);
        DescriptorExchange.ExchangeReply reply = exchange(socketPath, DescriptorExchange.regionRequest(), new int[] {fd},
                0, fds, timeout);
        if (reply.handle().isEmpty()) throw new IOException("the descriptor socket answered a region with no handle");
        return reply.handle().get();
    }

    private static DescriptorExchange.ExchangeReply exchange(String socketPath, byte[] request, int[] send, int maxFds,
                                                             List<Integer> received, Duration timeout) throws IOException {
        int fd = UnixSocket.open();
        if (fd < 0) throw new IOException("socket() failed: errno " + -fd);
        try {
            check(UnixSocket.setTimeouts(fd, Math.max(1, timeout.toMillis())), "setting the descriptor socket timeouts");
            check(UnixSocket.connect(fd, socketPath), "connecting to the descriptor socket " + socketPath);
            long sent = UnixSocket.send(fd, request, send);
            check(sent, "sending to the descriptor socket");
            if (sent != request.length) throw new IOException("the descriptor socket took " + sent + " of " + request.length + " bytes");
            byte[] reply = new byte[DescriptorExchange.MESSAGE_BYTES];
            int have = 0;
            while (have < reply.length) {
                long n = UnixSocket.receive(fd, reply, have, reply.length - have, maxFds, received);
                if (n == 0) throw new IOException("the descriptor socket closed after " + have + " bytes of its reply");
                check(n, "receiving from the descriptor socket");
                have += (int) n;
            }
            DescriptorExchange.ExchangeReply decoded;
            try {
                decoded = DescriptorExchange.decodeReply(reply);
            } catch (IllegalArgumentException e) {
                throw new IOException("the descriptor socket's reply is not one: " + e.getMessage(), e);
            }
            if (decoded.errorCode() != 0) {
                ErrorCode code = decoded.error().orElse(ErrorCode.INTERNAL);
                throw new OrbitKvException(code, "the descriptor socket refused the " + (maxFds > 0 ? "ticket" : "region")
                        + " (error code " + decoded.errorCode() + ")");
            }
            return decoded;
        } catch (IOException | RuntimeException e) {
            for (int r : received) UnixSocket.close(r);
            received.clear();
            throw e;
        } finally {
            UnixSocket.close(fd);
        }
    }

    private static void check(long result, String what) throws IOException {
        if (result < 0) {
            throw new IOException(what + " failed: errno " + -result
                    + (-result == UnixSocket.EAGAIN ? " (timed out)" : ""));
        }
    }
}
