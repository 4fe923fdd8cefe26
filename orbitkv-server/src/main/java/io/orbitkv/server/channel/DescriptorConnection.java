package io.orbitkv.server.channel;

import io.orbitkv.state.protocol.DescriptorExchange;
import io.orbitkv.state.unix.UnixSocket;
import java.util.Arrays;
import java.util.List;

/**
 * One connection of the descriptor socket ({@link DescriptorServer}): owns its descriptor, knows
 * when it was accepted (the time its ticket is judged at) and whether a byte has arrived (until
 * then a newcomer may displace it), and reads its request whole ({@link #readRequest}).
 *
 * <p>Thread model: its exchange thread reads and closes; the accept thread may {@link #displace}
 * it. Invariants: the descriptor is closed once, by {@link #close} under the monitor, and a
 * displacement shuts it down only while it is open, so it never touches a reused descriptor
 * number; the request is read at most {@link AdmissionLimits#DESCRIPTOR_REQUEST_BOUND_BYTES} and
 * at most {@link AdmissionLimits#DESCRIPTOR_READ_DEADLINE} after the read began.
 */
final class DescriptorConnection {

    final int fd;
    final long acceptedAtNanos;
    /** The peer's uid ({@code SO_PEERCRED}); set by the accept thread before the exchange thread starts. */
    volatile int uid;
    /** Set once the first byte of the request arrived: the connection is no longer silent. */
    volatile boolean heard;
    /** Set by {@link #displace}: closed for a newcomer, counted as displaced rather than dropped. */
    volatile boolean displaced;
    /** Guarded by {@code this}. */
    private boolean closed;

    DescriptorConnection(int fd, long acceptedAtNanos) {
        this.fd = fd;
        this.acceptedAtNanos = acceptedAtNanos;
    }

    /** Wakes a receive blocked on it; the exchange thread then closes it. */
    synchronized void displace() {
        displaced = true;
        if (!closed) UnixSocket.shutdown(fd);
    }

    /** Closes the descriptor; idempotent. */
    synchronized void close() {
        if (closed) return;
        closed = true;
        UnixSocket.close(fd);
    }

    /** What arrived on a connection before its end, its read deadline or the bound. */
    sealed interface Request {
        /** Nothing: nothing to answer; {@code timedOut} when the read deadline, not the client, ended it. */
        record Silent(boolean timedOut) implements Request {
        }

        /** Some bytes, but not a whole request (or too many descriptors): answered MALFORMED. */
        record Partial() implements Request {
        }

        /** Everything the client sent, up to the bound: 24 bytes is a request, anything else MALFORMED. */
        record Whole(byte[] bytes) implements Request {
        }
    }

    /**
     * Reads what the client sends until it has 24 bytes and nothing more is waiting, the stream
     * ends, {@link AdmissionLimits#DESCRIPTOR_READ_DEADLINE} passes or
     * {@link AdmissionLimits#DESCRIPTOR_REQUEST_BOUND_BYTES} arrived. Longer input is read whole
     * (to the bound) so that closing after the answer does not reset the client before it reads it.
     */
    Request readRequest(List<Integer> received) {
        long deadlineNanos = System.nanoTime() + AdmissionLimits.DESCRIPTOR_READ_DEADLINE.toNanos();
        byte[] into = new byte[AdmissionLimits.DESCRIPTOR_REQUEST_BOUND_BYTES];
        int have = 0;
        boolean timedOut = false;
        while (have < into.length) {
            long leftMillis = (deadlineNanos - System.nanoTime()) / 1_000_000;
            // Past 24 bytes only what the client has already sent matters: a short wait for the rest.
            long waitMillis = have > DescriptorExchange.MESSAGE_BYTES
                    ? Math.min(leftMillis, AdmissionLimits.DESCRIPTOR_LINGER.toMillis()) : leftMillis;
            if (waitMillis <= 0 || UnixSocket.setTimeouts(fd, waitMillis) < 0) {
                timedOut = true;
                break;
            }
            long n = UnixSocket.receive(fd, into, have, into.length - have, 1, received);
            if (n == -UnixSocket.EMSGSIZE) return new Request.Partial();
            if (n <= 0) {
                timedOut = n == -UnixSocket.EAGAIN;
                break; // end of stream, the deadline, or a displacement
            }
            heard = true;
            have += (int) n;
            if (have == DescriptorExchange.MESSAGE_BYTES) break; // a request as clients send it: answered at once
        }
        if (have == 0) return new Request.Silent(timedOut && !displaced);
        if (have < DescriptorExchange.MESSAGE_BYTES) return new Request.Partial();
        return new Request.Whole(Arrays.copyOf(into, have));
    }
}
