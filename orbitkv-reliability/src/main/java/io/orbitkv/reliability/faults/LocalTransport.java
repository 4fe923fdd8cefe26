package io.orbitkv.reliability.faults;

import io.orbitkv.core.peer.AuthorizeRequest;
import io.orbitkv.core.peer.AuthorizeResult;
import io.orbitkv.core.peer.NodeIncarnation;
import io.orbitkv.core.peer.PayloadSink;
import io.orbitkv.core.peer.PayloadTransport;
import io.orbitkv.core.peer.PeerEndpoint;
import io.orbitkv.core.peer.PeerSource;
import io.orbitkv.core.peer.TicketTable;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.zip.CRC32C;

/**
 * The campaign's network between Managers in one JVM: each call goes straight to the real
 * {@link PeerSource} serving the endpoint's address, as the gRPC and bulk services do after
 * decoding, and a transfer streams the pinned image in {@link #CHUNK_BYTES} chunks followed by
 * the CRC32C the source computed over what it sent. An address nobody serves (its Manager is
 * down) answers as an unreachable host: UNREACHABLE, BROKEN, FAILED.
 *
 * <p>Owns the map of serving addresses; borrows the sources. Thread-safe. Never late and never
 * lost: every future is complete when the call returns, except an SSD authorize, which the
 * source completes on its SSD worker. Lateness, loss and damage are {@link FaultyTransport}'s.
 *
 * <p>Design note: the chunk is 8 KiB so that a 20 KiB page of the campaign moves in three
 * chunks and a reset can stop it after one or two; the source is called under the same ticket
 * rules as over the wire ({@link PeerSource#beginTransfer} / {@link PeerSource#endTransfer}).
 */
final class LocalTransport implements PayloadTransport {

    static final int CHUNK_BYTES = 8 * 1024;

    private final Map<String, PeerSource> serving = new ConcurrentHashMap<>();

    /** {@code source} answers for {@code address} from now on. */
    void serve(String address, PeerSource source) {
        serving.put(address, source);
    }

    /** Nobody answers for {@code address} any more (its Manager died). */
    void down(String address) {
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
    private static TransferEnd stream(MemorySegment payload, PayloadSink sink) {
        CRC32C crc = new CRC32C();
        long length = payload.byteSize();
        for (long off = 0; off < length; off += CHUNK_BYTES) {
            int n = (int) Math.min(CHUNK_BYTES, length - off);
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
