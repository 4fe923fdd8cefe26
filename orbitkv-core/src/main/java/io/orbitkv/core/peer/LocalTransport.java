package io.orbitkv.core.peer;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.zip.CRC32C;

/**
 * The network between Managers in one JVM (the reliability campaign's, and the peer tests'):
 * each call goes straight to the real {@link PeerSource} serving the endpoint's address, as the
 * gRPC and bulk services do after decoding, and a transfer streams the pinned image in chunks of
 * {@code chunkBytes} followed by the CRC32C the source computed over what it sent. An address
 * nobody serves (its Manager is down) answers as an unreachable host: UNREACHABLE, BROKEN, FAILED.
 *
 * <p>Owns the map of serving addresses; borrows the sources. Thread-safe. Never late and never
 * lost: every future is complete when the call returns, except an SSD authorize, which the
 * source completes on its SSD worker. Lateness, loss and damage belong to a decorator (the
 * campaign's {@code FaultyTransport}, the tests' {@code InMemoryTransport}): a sink that takes no
 * more ends the transfer BROKEN, and a chunk the sink changes is not in the checksum.
 *
 * <p>Design note: the source is called under the same ticket rules as over the wire
 * ({@link PeerSource#beginTransfer} / {@link PeerSource#endTransfer}); the chunk size is the
 * caller's (the campaign moves a 20 KiB page in three 8 KiB chunks so that a reset can stop it
 * after one or two).
 */
public final class LocalTransport implements PayloadTransport {

    private final int chunkBytes;
    private final Map<String, PeerSource> serving = new ConcurrentHashMap<>();

    /** @param chunkBytes the largest chunk a transfer hands the sink at once */
    public LocalTransport(int chunkBytes) {
        if (chunkBytes < 1) throw new IllegalArgumentException("chunkBytes must be >= 1: " + chunkBytes);
        this.chunkBytes = chunkBytes;
    }

    /** {@code source} answers for {@code address} from now on. */
    public void serve(String address, PeerSource source) {
        serving.put(address, source);
    }

    /** Nobody answers for {@code address} any more (its Manager died). */
    public void down(String address) {
        serving.remove(address);
    }

    @Override
    public CompletableFuture<AuthorizeResult> authorize(PeerEndpoint source, AuthorizeRequest request) {
        PeerSource s = serving.get(source.address());
        if (s == null) return CompletableFuture.completedFuture(new AuthorizeResult.Rejected(AuthorizeResult.Rejection.UNREACHABLE));
        return s.authorize(request);
    }

    @Override
    public CompletableFuture<TransferEnd> transfer(PeerEndpoint source, AuthorizeResult.Granted ticket,
                                                   NodeIncarnation requester, PayloadSink sink) {
        PeerSource s = serving.get(source.address());
        if (s == null) return CompletableFuture.completedFuture(TransferEnd.BROKEN);
        return CompletableFuture.completedFuture(switch (s.beginTransfer(ticket.ticketId(), requester)) {
            case TicketTable.BeginResult.Refused r -> TransferEnd.REFUSED;
            case TicketTable.BeginResult.Reading reading -> {
                try {
                    yield stream(reading.image().payload(), sink);
                } finally {
                    s.endTransfer(ticket.ticketId());
                }
            }
        });
    }

    /** Sends {@code payload} in chunks, then its CRC32C; BROKEN as soon as the sink takes no more. */
    private TransferEnd stream(MemorySegment payload, PayloadSink sink) {
        CRC32C crc = new CRC32C();
        long length = payload.byteSize();
        for (long off = 0; off < length; off += chunkBytes) {
            int n = (int) Math.min(chunkBytes, length - off);
            ByteBuffer chunk = ByteBuffer.allocate(n);
            MemorySegment.copy(payload, off, MemorySegment.ofBuffer(chunk), 0, n);
            // the checksum covers what the source sent: damage on the way must not be in it
            crc.update(chunk.duplicate());
            if (!sink.onChunk(off, chunk)) return TransferEnd.BROKEN;
        }
        sink.onTrailer((int) crc.getValue());
        return TransferEnd.COMPLETED;
    }

    @Override
    public CompletableFuture<ReleaseAck> release(PeerEndpoint source, long ticketId, NodeIncarnation requester) {
        PeerSource s = serving.get(source.address());
        if (s == null) return CompletableFuture.completedFuture(ReleaseAck.FAILED);
        s.release(ticketId, requester);
        return CompletableFuture.completedFuture(ReleaseAck.ACKED);
    }
}
