package io.orbitkv.server.peer.bulk;

import java.time.Duration;
import java.util.Objects;

/**
 * The bounds of the bulk data plane (docs/peer-data-plane.md, "Bounds"). Each limit says who
 * enforces it and why it has its size; the constructor enforces the relations between them.
 *
 * @param maxPagesPerBatch        pages one BATCH_REQUEST may name; checked by the source's decoder
 *                                before the page list is read (256: four query batches of 64 pages)
 * @param maxPageBytes            largest payload of one PAGE frame; checked by the requester before
 *                                it reserves anything (64 MiB: 32× the 2 MiB DRAM class)
 * @param connectionsPerPeer      connections the requester keeps to one source (4: one 2 MiB page
 *                                fills a 10 GbE link for ~1.7 ms, four streams hide one batch's
 *                                request round trip and the source's per-page authorize)
 * @param queuedBatchesPerPeer    batches waiting for a connection of one source; more are refused
 *                                before any byte (a miss), never queued without bound
 * @param inflightBytesPerPeer    payload bytes the requester is receiving from one source at once
 *                                (each connection holds at most one page being written into a slot)
 * @param inflightBytesPerManager payload bytes the requester is receiving from all sources at once
 * @param sendQueueBytes          payload bytes the source is writing to all its connections at once;
 *                                a page over it waits up to {@code budgetWait}, then is refused
 *                                (SOURCE_BUSY) before any payload byte
 * @param maxConnections          connections a source serves at once; one more is closed at accept
 * @param budgetWait              longest wait for an in-flight or send-queue budget before the page
 *                                is refused (a miss); short, because the query waits on it
 * @param handshakeTimeout        connect plus authentication must finish within this
 * @param batchDeadline           a batch not finished within this closes its connection (misses)
 */
public record BulkLimits(int maxPagesPerBatch, int maxPageBytes, int connectionsPerPeer, int queuedBatchesPerPeer,
                         long inflightBytesPerPeer, long inflightBytesPerManager, long sendQueueBytes,
                         int maxConnections, Duration budgetWait, Duration handshakeTimeout, Duration batchDeadline) {

    /** Page ids fit the wire's u16 index. */
    public static final int WIRE_MAX_PAGES = 65_535;

    public BulkLimits {
        Objects.requireNonNull(budgetWait, "budgetWait");
        Objects.requireNonNull(handshakeTimeout, "handshakeTimeout");
        Objects.requireNonNull(batchDeadline, "batchDeadline");
        if (maxPagesPerBatch < 1 || maxPagesPerBatch > WIRE_MAX_PAGES) throw new IllegalArgumentException("maxPagesPerBatch: " + maxPagesPerBatch);
        if (maxPageBytes < 1) throw new IllegalArgumentException("maxPageBytes: " + maxPageBytes);
        if (connectionsPerPeer < 1) throw new IllegalArgumentException("connectionsPerPeer: " + connectionsPerPeer);
        if (queuedBatchesPerPeer < 1) throw new IllegalArgumentException("queuedBatchesPerPeer: " + queuedBatchesPerPeer);
        if (inflightBytesPerPeer < 1 || inflightBytesPerManager < inflightBytesPerPeer) {
            throw new IllegalArgumentException("want 1 <= inflightBytesPerPeer <= inflightBytesPerManager: "
                    + inflightBytesPerPeer + ", " + inflightBytesPerManager);
        }
        if (sendQueueBytes < 1) throw new IllegalArgumentException("sendQueueBytes: " + sendQueueBytes);
        if (maxConnections < 1) throw new IllegalArgumentException("maxConnections: " + maxConnections);
        if (budgetWait.isNegative() || handshakeTimeout.isNegative() || handshakeTimeout.isZero()
                || batchDeadline.isNegative() || batchDeadline.isZero()) {
            throw new IllegalArgumentException("durations must be positive");
        }
    }

    /**
     * Defaults: 256 pages, 64 MiB pages, 4 connections and 64 queued batches per peer, 64 MiB in
     * flight per peer and 256 MiB per Manager (128 pages of 2 MiB), 256 MiB of send queue, 256
     * connections, 1 s budget wait, 2 s handshake, 10 s batch deadline (the gRPC transfer deadline).
     */
    public static BulkLimits defaults() {
        return new BulkLimits(256, 64 << 20, 4, 64, 64L << 20, 256L << 20, 256L << 20, 256,
                Duration.ofSeconds(1), Duration.ofSeconds(2), Duration.ofSeconds(10));
    }

    /** The largest BATCH_REQUEST body this limit set accepts. */
    public int maxRequestBodyBytes() {
        return BulkLayout.REQUEST_FIXED_BYTES + BulkLayout.MAX_NODE_ID_BYTES + maxPagesPerBatch * BulkLayout.REQUEST_PAGE_BYTES;
    }

    /** This limit set with {@code bytes} in flight per peer and per Manager (tests). */
    public BulkLimits withInflight(long perPeer, long perManager) {
        return new BulkLimits(maxPagesPerBatch, maxPageBytes, connectionsPerPeer, queuedBatchesPerPeer, perPeer, perManager,
                sendQueueBytes, maxConnections, budgetWait, handshakeTimeout, batchDeadline);
    }

    /** This limit set with {@code connections} per peer. */
    public BulkLimits withConnectionsPerPeer(int connections) {
        return new BulkLimits(maxPagesPerBatch, maxPageBytes, connections, queuedBatchesPerPeer, inflightBytesPerPeer,
                inflightBytesPerManager, sendQueueBytes, maxConnections, budgetWait, handshakeTimeout, batchDeadline);
    }

    /** This limit set with {@code bytes} of send queue at the source. */
    public BulkLimits withSendQueueBytes(long bytes) {
        return new BulkLimits(maxPagesPerBatch, maxPageBytes, connectionsPerPeer, queuedBatchesPerPeer, inflightBytesPerPeer,
                inflightBytesPerManager, bytes, maxConnections, budgetWait, handshakeTimeout, batchDeadline);
    }
}
