package io.orbitkv.server.channel;

import java.time.Duration;

/**
 * The bounds that keep a flood of idle or hostile connections from locking engines out of the
 * engine channel and the descriptor socket. Each says who enforces it and why it has its size.
 *
 * <p>Constants; no state. The relations between them (a uid's share is below the total, so
 * another uid always finds a place) are checked where they are used, by {@link UidPlaces}.
 */
final class AdmissionLimits {

    private AdmissionLimits() {
    }

    /**
     * The places of {@code maxUnregistered} (channel, {@link ChannelServer}) one uid may hold:
     * three quarters rounded up (24 of 32), so a quarter (8 of 32) stays for other uids whatever
     * one uid keeps open; at 1 to 3 places there is nothing to split and one uid may hold all.
     */
    static int unregisteredPerUid(int maxUnregistered) {
        return maxUnregistered - maxUnregistered / 4;
    }

    /**
     * An unregistered channel connection that has sent no byte for this long may be displaced by
     * a newcomer when no place is free (ERROR BUSY under request id 0, then close; {@link
     * ChannelServer}). Engines send REGISTER microseconds after connecting; 1 s is three orders of
     * magnitude of slack and keeps a same-uid newcomer's wait under a flood near 1 s instead of
     * the registration deadline (10 s). Capped at half the registration deadline.
     */
    static Duration silentGrace(Duration registerTimeout) {
        Duration half = registerTimeout.dividedBy(2);
        return half.compareTo(SILENT_GRACE) < 0 ? half : SILENT_GRACE;
    }

    private static final Duration SILENT_GRACE = Duration.ofSeconds(1);

    /**
     * Over-limit channel connections waiting for their first frame at once (a virtual thread and a
     * 16-byte header buffer each, {@link FirstFrameRefusal}); one more displaces the oldest of them
     * that has sent nothing for {@link #silentGrace} (ERROR BUSY under request id 0), and only when
     * none has is it answered ERROR BUSY under request id 0 at accept. 256 (one more
     * {@code maxConnections}) costs a few hundred KiB and covers every engine of a host retrying at once.
     */
    static final int REFUSING_CONNECTIONS = 256;

    /**
     * Descriptor-socket connections open at once (each on its own platform thread reading its
     * 24-byte request; {@link DescriptorServer}). 128 is half {@code maxConnections}: fetches follow
     * REGISTERED, which is itself bounded by 32 unregistered places, and each lasts microseconds.
     */
    static final int DESCRIPTOR_CONNECTIONS = 128;

    /**
     * Descriptor-socket connections one uid may hold open: a quarter of {@link
     * #DESCRIPTOR_CONNECTIONS}, so three other uids always find places. At the bound, the uid's
     * own oldest connection that has sent nothing yet is closed for the newcomer.
     */
    static final int DESCRIPTOR_CONNECTIONS_PER_UID = 32;

    /**
     * How long a descriptor-socket connection may take to deliver its request whole: a client
     * writes its 24 bytes right after connecting, so 1 s only bounds what a silent or dribbling
     * connection holds (the send of the reply keeps {@code exchangeTimeout}).
     */
    static final Duration DESCRIPTOR_READ_DEADLINE = Duration.ofSeconds(1);

    /**
     * Bytes of a descriptor-socket request read at most before it is answered: a request longer
     * than 24 bytes is read whole up to this bound (so closing does not reset the client before it
     * reads the answer) and answered MALFORMED.
     */
    static final int DESCRIPTOR_REQUEST_BOUND_BYTES = 4096;

    /**
     * Once more than 24 bytes of a descriptor-socket request arrived, how long each further read
     * waits for the rest before the request is answered MALFORMED: what a client wrote in one go
     * is already there, so a few milliseconds suffice; 50 ms absorbs a preempted writer.
     */
    static final Duration DESCRIPTOR_LINGER = Duration.ofMillis(50);
}
