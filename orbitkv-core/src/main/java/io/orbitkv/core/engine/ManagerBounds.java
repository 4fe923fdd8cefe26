package io.orbitkv.core.engine;

import io.orbitkv.core.query.SpeculationBounds;

import java.util.concurrent.TimeUnit;

/**
 * The Manager logic's own bounds (the wire-visible ones are in
 * {@link io.orbitkv.state.protocol.ProtocolLimits}). Immutable; validated on construction.
 *
 * @param maxLeases               pages leased to all operations of all sessions at once (the global lease
 *                                table); a query that would pass it is answered BUSY
 * @param stagingBudgetBytes      bytes being read from SSD into DRAM for queries at once, reserved before
 *                                any read (4 KiB-padded payload bytes)
 * @param stagesPerOperation      stagings one operation has submitted to the store at once; the rest wait
 *                                in the operation's queue, and CANCEL drops them without I/O
 * @param restoreCopyThreads      platform threads copying leased pages into engine regions
 * @param restoreQueuedTasks      copy tasks queued or running at once over all sessions; one more is BUSY
 * @param restoreInlineBytes      a RESTORE of at most this many bytes is copied on the thread that handles it
 *                                (the connection's), not by the copy threads; 0 sends every RESTORE to them
 * @param maxInstances            instance records (highest epoch per instance id) kept; records without an
 *                                open session are dropped oldest-first when full
 * @param maxReplans              times one query operation re-selects its boundary after staging failures
 *                                before it settles as a miss
 * @param fenceDrainTimeoutNanos  how long REGISTER (and {@code close()}) wait for a previous incarnation's
 *                                submitted I/O to drain
 * @param publishQuarantineNanos  how long an unsealed reservation's slot of a closed or fenced session is held
 *                                before it returns to the free list (protocol §9.6); 0 frees it at once
 * @param publishQuarantineBytes  slot bytes held in that quarantine at most; past it the oldest are freed early
 * @param peerWaitMaxNanos        the longest a QUERY may stay PENDING waiting for peers (catalog lookup and
 *                                peer fetches), whatever {@code peer_wait_millis} it asks; 0 never waits
 * @param reconnectGraceNanos     how long a REGISTER with the epoch of a still-connected incarnation waits for
 *                                that connection's close to be processed before it is refused STALE_EPOCH
 *                                (protocol §9.2; 250 ms default)
 * @param speculation             PREPARE's speculation budget and timing ({@link SpeculationBounds})
 */
public record ManagerBounds(long maxLeases, long stagingBudgetBytes, int stagesPerOperation, int restoreCopyThreads,
                            int restoreQueuedTasks, long restoreInlineBytes, int maxInstances, int maxReplans, long fenceDrainTimeoutNanos,
                            long publishQuarantineNanos, long publishQuarantineBytes, long peerWaitMaxNanos,
                            long reconnectGraceNanos, SpeculationBounds speculation) {

    /**
     * The default {@code restoreInlineBytes}: 16 MiB, an 8-page restore of 2 MiB pages, copied in
     * about 1 ms at 16 GB/s on one thread. Below it the hand-offs of the copy threads (submit,
     * one completion hop, the connection's writer) cost as much as the copy saves by running on
     * several threads, and on a loaded host each waits for a core (docs/performance.md, Manager);
     * above it a restore would hold the connection's thread (its carrier) for more than a
     * millisecond, so the copy threads take it. The connection's next request waits for an
     * inline copy, which an engine restoring a hit does anyway.
     */
    public static final long RESTORE_INLINE_BYTES = 16L << 20;

    /**
     * Defaults for a single-node daemon: 1 M leases (a 16-token page each: 16 M tokens), 1 GiB
     * staging, a 5 s publish quarantine of at most 256 MiB, peer waits of at most 5 s, a 250 ms
     * reconnect grace.
     */
    public static final ManagerBounds DEFAULTS = new ManagerBounds(1 << 20, 1L << 30, 64, 4, 1024, RESTORE_INLINE_BYTES,
            4096, 4, TimeUnit.SECONDS.toNanos(30), TimeUnit.SECONDS.toNanos(5), 256L << 20, TimeUnit.SECONDS.toNanos(5),
            TimeUnit.MILLISECONDS.toNanos(250), SpeculationBounds.DEFAULTS);

    public ManagerBounds {
        if (maxLeases < 1) throw new IllegalArgumentException("maxLeases must be >= 1: " + maxLeases);
        if (stagingBudgetBytes < 1) throw new IllegalArgumentException("stagingBudgetBytes must be >= 1");
        if (stagesPerOperation < 1) throw new IllegalArgumentException("stagesPerOperation must be >= 1");
        if (restoreCopyThreads < 1) throw new IllegalArgumentException("restoreCopyThreads must be >= 1");
        if (restoreQueuedTasks < restoreCopyThreads) {
            throw new IllegalArgumentException("restoreQueuedTasks must be >= restoreCopyThreads");
        }
        if (restoreInlineBytes < 0) throw new IllegalArgumentException("restoreInlineBytes must be >= 0");
        if (maxInstances < 1) throw new IllegalArgumentException("maxInstances must be >= 1");
        if (maxReplans < 0) throw new IllegalArgumentException("maxReplans must be >= 0");
        if (fenceDrainTimeoutNanos < 1) throw new IllegalArgumentException("fenceDrainTimeoutNanos must be >= 1");
        if (publishQuarantineNanos < 0) throw new IllegalArgumentException("publishQuarantineNanos must be >= 0");
        if (publishQuarantineBytes < 0) throw new IllegalArgumentException("publishQuarantineBytes must be >= 0");
        if (peerWaitMaxNanos < 0) throw new IllegalArgumentException("peerWaitMaxNanos must be >= 0");
        if (reconnectGraceNanos < 0) throw new IllegalArgumentException("reconnectGraceNanos must be >= 0");
        java.util.Objects.requireNonNull(speculation, "speculation");
    }

    public ManagerBounds withMaxLeases(long leases) {
        return new ManagerBounds(leases, stagingBudgetBytes, stagesPerOperation, restoreCopyThreads,
                restoreQueuedTasks, restoreInlineBytes, maxInstances, maxReplans, fenceDrainTimeoutNanos,
                publishQuarantineNanos, publishQuarantineBytes, peerWaitMaxNanos, reconnectGraceNanos, speculation);
    }

    public ManagerBounds withStagingBudgetBytes(long bytes) {
        return new ManagerBounds(maxLeases, bytes, stagesPerOperation, restoreCopyThreads, restoreQueuedTasks,
                restoreInlineBytes, maxInstances, maxReplans, fenceDrainTimeoutNanos, publishQuarantineNanos,
                publishQuarantineBytes, peerWaitMaxNanos, reconnectGraceNanos, speculation);
    }

    public ManagerBounds withStagesPerOperation(int stages) {
        return new ManagerBounds(maxLeases, stagingBudgetBytes, stages, restoreCopyThreads, restoreQueuedTasks,
                restoreInlineBytes, maxInstances, maxReplans, fenceDrainTimeoutNanos, publishQuarantineNanos,
                publishQuarantineBytes, peerWaitMaxNanos, reconnectGraceNanos, speculation);
    }

    public ManagerBounds withRestore(int threads, int queuedTasks) {
        return new ManagerBounds(maxLeases, stagingBudgetBytes, stagesPerOperation, threads, queuedTasks,
                restoreInlineBytes, maxInstances, maxReplans, fenceDrainTimeoutNanos, publishQuarantineNanos,
                publishQuarantineBytes, peerWaitMaxNanos, reconnectGraceNanos, speculation);
    }

    /** These bounds with RESTOREs of at most {@code bytes} copied on the connection's thread (0: none). */
    public ManagerBounds withRestoreInlineBytes(long bytes) {
        return new ManagerBounds(maxLeases, stagingBudgetBytes, stagesPerOperation, restoreCopyThreads,
                restoreQueuedTasks, bytes, maxInstances, maxReplans, fenceDrainTimeoutNanos, publishQuarantineNanos,
                publishQuarantineBytes, peerWaitMaxNanos, reconnectGraceNanos, speculation);
    }

    public ManagerBounds withFenceDrainTimeoutNanos(long nanos) {
        return new ManagerBounds(maxLeases, stagingBudgetBytes, stagesPerOperation, restoreCopyThreads,
                restoreQueuedTasks, restoreInlineBytes, maxInstances, maxReplans, nanos, publishQuarantineNanos,
                publishQuarantineBytes, peerWaitMaxNanos, reconnectGraceNanos, speculation);
    }

    public ManagerBounds withPublishQuarantine(long nanos, long bytes) {
        return new ManagerBounds(maxLeases, stagingBudgetBytes, stagesPerOperation, restoreCopyThreads,
                restoreQueuedTasks, restoreInlineBytes, maxInstances, maxReplans, fenceDrainTimeoutNanos, nanos, bytes,
                peerWaitMaxNanos, reconnectGraceNanos, speculation);
    }

    public ManagerBounds withPeerWaitMaxNanos(long nanos) {
        return new ManagerBounds(maxLeases, stagingBudgetBytes, stagesPerOperation, restoreCopyThreads,
                restoreQueuedTasks, restoreInlineBytes, maxInstances, maxReplans, fenceDrainTimeoutNanos, publishQuarantineNanos,
                publishQuarantineBytes, nanos, reconnectGraceNanos, speculation);
    }

    public ManagerBounds withReconnectGraceNanos(long nanos) {
        return new ManagerBounds(maxLeases, stagingBudgetBytes, stagesPerOperation, restoreCopyThreads,
                restoreQueuedTasks, restoreInlineBytes, maxInstances, maxReplans, fenceDrainTimeoutNanos,
                publishQuarantineNanos, publishQuarantineBytes, peerWaitMaxNanos, nanos, speculation);
    }

    /** These bounds with PREPARE's speculation budget and timing replaced. */
    public ManagerBounds withSpeculation(SpeculationBounds bounds) {
        return new ManagerBounds(maxLeases, stagingBudgetBytes, stagesPerOperation, restoreCopyThreads,
                restoreQueuedTasks, restoreInlineBytes, maxInstances, maxReplans, fenceDrainTimeoutNanos,
                publishQuarantineNanos, publishQuarantineBytes, peerWaitMaxNanos, reconnectGraceNanos, bounds);
    }
}
