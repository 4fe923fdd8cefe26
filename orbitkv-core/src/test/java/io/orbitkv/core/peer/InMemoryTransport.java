package io.orbitkv.core.peer;

import java.nio.ByteBuffer;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.zip.CRC32C;

/**
 * A {@link PayloadTransport} that calls the source's {@link PeerSource} directly, chunking the
 * payload like the gRPC service does, with hooks to corrupt a chunk, break a stream or fail
 * releases. For tests of the requester's workflow without sockets.
 */
public final class InMemoryTransport implements PayloadTransport {

    static final int CHUNK = 16 * 1024;

    final Map<String, PeerSource> sources = new ConcurrentHashMap<>();
    public volatile int corruptChunk = -1;
    volatile int breakAfterChunks = -1;
    final AtomicInteger failReleases = new AtomicInteger();
    public final AtomicInteger releaseCalls = new AtomicInteger();

    void add(PeerNode node) {
        add("mem:" + node.self.nodeId(), node.source);
    }

    public void add(String address, PeerSource source) {
        sources.put(address, source);
    }

    @Override
    public CompletableFuture<AuthorizeResult> authorize(PeerEndpoint source, AuthorizeRequest request) {
        PeerSource s = sources.get(source.address());
        if (s == null) return CompletableFuture.completedFuture(new AuthorizeResult.Rejected(AuthorizeResult.Rejection.UNREACHABLE));
        return s.authorize(request);
    }

    @Override
    public CompletableFuture<TransferEnd> transfer(PeerEndpoint source, AuthorizeResult.Granted ticket,
                                                   NodeIncarnation requester, PayloadSink sink) {
        PeerSource s = sources.get(source.address());
        if (s == null) return CompletableFuture.completedFuture(TransferEnd.BROKEN);
        return switch (s.beginTransfer(ticket.ticketId(), requester)) {
            case TicketTable.BeginResult.Refused r -> CompletableFuture.completedFuture(TransferEnd.REFUSED);
            case TicketTable.BeginResult.Reading reading -> {
                try {
                    ByteBuffer payload = reading.image().payload().asByteBuffer();
                    CRC32C crc = new CRC32C();
                    int chunk = 0;
                    for (int off = 0; off < payload.limit(); off += CHUNK, chunk++) {
                        if (chunk == breakAfterChunks) yield CompletableFuture.completedFuture(TransferEnd.BROKEN);
                        ByteBuffer piece = ByteBuffer.allocate(Math.min(CHUNK, payload.limit() - off));
                        piece.put(payload.slice(off, piece.capacity())).flip();
                        crc.update(piece.duplicate());
                        if (chunk == corruptChunk) piece.put(7, (byte) (piece.get(7) ^ 0x40));
                        if (!sink.onChunk(off, piece)) yield CompletableFuture.completedFuture(TransferEnd.BROKEN);
                    }
                    sink.onTrailer((int) crc.getValue());
                    yield CompletableFuture.completedFuture(TransferEnd.COMPLETED);
                } finally {
                    s.endTransfer(ticket.ticketId());
                }
            }
        };
    }

    @Override
    public CompletableFuture<ReleaseAck> release(PeerEndpoint source, long ticketId, NodeIncarnation requester) {
        releaseCalls.incrementAndGet();
        if (failReleases.getAndUpdate(n -> Math.max(0, n - 1)) > 0) return CompletableFuture.completedFuture(ReleaseAck.FAILED);
        PeerSource s = sources.get(source.address());
        if (s == null) return CompletableFuture.completedFuture(ReleaseAck.FAILED);
        s.release(ticketId, requester);
        return CompletableFuture.completedFuture(ReleaseAck.ACKED);
    }
}
