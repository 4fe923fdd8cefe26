package io.orbitkv.core.peer;

import java.nio.ByteBuffer;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The in-JVM {@link LocalTransport} in 16 KiB chunks, as the gRPC service sends them, with hooks
 * to corrupt a chunk (after the source's checksum), break a stream before a chunk, or fail
 * releases; and to inject a bug ({@link #bug}) where the contract says the transport answers
 * values. For tests of the requester's workflow without sockets.
 */
public final class InMemoryTransport implements PayloadTransport {

    static final int CHUNK = 16 * 1024;

    private final LocalTransport network = new LocalTransport(CHUNK);
    public volatile int corruptChunk = -1;
    volatile int breakAfterChunks = -1;
    final AtomicInteger failReleases = new AtomicInteger();
    public final AtomicInteger releaseCalls = new AtomicInteger();
    volatile Bug bug = Bug.NONE;

    /** Where the transport throws (or fails its future) instead of answering a value. */
    enum Bug { NONE, AUTHORIZE_THROWS, TRANSFER_THROWS, FETCH_FAILS_AFTER_STREAM, BATCH_THROWS }

    @Override
    public CompletableFuture<FetchOutcome> fetch(PeerEndpoint source, AuthorizeRequest request, FetchSink receiver) {
        CompletableFuture<FetchOutcome> streamed = PayloadTransport.super.fetch(source, request, receiver);
        if (bug != Bug.FETCH_FAILS_AFTER_STREAM) return streamed;
        // the payload landed in the reserved slot, then the future fails
        return streamed.thenApply(outcome -> {
            throw new IllegalStateException("injected: fetch failed after streaming");
        });
    }

    @Override
    public List<CompletableFuture<FetchOutcome>> fetchBatch(PeerEndpoint source, List<AuthorizeRequest> requests,
                                                            List<? extends FetchSink> receivers) {
        if (bug == Bug.BATCH_THROWS) throw new IllegalStateException("injected: fetchBatch threw");
        return PayloadTransport.super.fetchBatch(source, requests, receivers);
    }

    void add(PeerNode node) {
        add("mem:" + node.self.nodeId(), node.source);
    }

    public void add(String address, PeerSource source) {
        network.serve(address, source);
    }

    @Override
    public CompletableFuture<AuthorizeResult> authorize(PeerEndpoint source, AuthorizeRequest request) {
        if (bug == Bug.AUTHORIZE_THROWS) throw new IllegalStateException("injected: authorize threw");
        return network.authorize(source, request);
    }

    @Override
    public CompletableFuture<TransferEnd> transfer(PeerEndpoint source, AuthorizeResult.Granted ticket,
                                                   NodeIncarnation requester, PayloadSink sink) {
        if (bug == Bug.TRANSFER_THROWS) throw new IllegalStateException("injected: transfer threw");
        int corrupt = corruptChunk;
        int breakAt = breakAfterChunks;
        return network.transfer(source, ticket, requester, new PayloadSink() {
            private int chunk;

            @Override
            public boolean onChunk(long offset, ByteBuffer piece) {
                int index = chunk++;
                if (index == breakAt) return false;
                if (index == corrupt) piece.put(piece.position() + 7, (byte) (piece.get(piece.position() + 7) ^ 0x40));
                return sink.onChunk(offset, piece);
            }

            @Override
            public void onTrailer(int crc32c) {
                sink.onTrailer(crc32c);
            }
        });
    }

    @Override
    public CompletableFuture<ReleaseAck> release(PeerEndpoint source, long ticketId, NodeIncarnation requester) {
        releaseCalls.incrementAndGet();
        if (failReleases.getAndUpdate(n -> Math.max(0, n - 1)) > 0) return CompletableFuture.completedFuture(ReleaseAck.FAILED);
        return network.release(source, ticketId, requester);
    }
}
