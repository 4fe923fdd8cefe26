package io.orbitkv.core.storage.publish;

import java.util.Objects;
import java.util.concurrent.TimeUnit;

/**
 * Budgets of the publish pipeline and its SSD dispatcher. Immutable; validated on construction.
 *
 * @param sealQueueBytes          bytes of blocks waiting to be sealed into DRAM; one more is Busy
 * @param sealQueueEntries        blocks waiting to be sealed (bounds the queue for tiny blocks)
 * @param policy                  when a DRAM-resident block is written to SSD
 * @param writeBytesPerSecond     SSD write rate allowed ({@code Long.MAX_VALUE}: unlimited)
 * @param writeBurstBytes         token-bucket depth of that rate
 * @param writeQueueBytes         bytes admitted for SSD and not yet written (or dropped)
 * @param readLaneOps             restore reads waiting for a submission slot
 * @param writeLaneOps            SSD writes waiting for a submission slot; a full lane drops its oldest
 * @param maxReadsWhileWriteWaits K: reads started while a write waits, before that write goes
 * @param hitTableEntries         blocks whose DRAM hits are counted for {@code reuse-aware:N}
 * @param drainTimeoutNanos       how long close waits for queued and in-flight SSD work
 * @param ssdRefreshFraction      under {@code on-evict}, a page DRAM evicts whose SSD extent lies in
 *                                this oldest fraction of the ring is written again (0: never), so
 *                                pages used again move to the young end instead of aging out
 */
public record PublishConfig(
        long sealQueueBytes,
        int sealQueueEntries,
        SsdAdmissionPolicy policy,
        long writeBytesPerSecond,
        long writeBurstBytes,
        long writeQueueBytes,
        int readLaneOps,
        int writeLaneOps,
        int maxReadsWhileWriteWaits,
        int hitTableEntries,
        long drainTimeoutNanos,
        double ssdRefreshFraction) {

    /** The oldest half: a page is rewritten at most once per half lap of the ring. */
    public static final double DEFAULT_SSD_REFRESH_FRACTION = 0.5;

    public PublishConfig {
        Objects.requireNonNull(policy, "policy");
        positive(sealQueueBytes, "sealQueueBytes");
        positive(sealQueueEntries, "sealQueueEntries");
        positive(writeBytesPerSecond, "writeBytesPerSecond");
        positive(writeBurstBytes, "writeBurstBytes");
        positive(writeQueueBytes, "writeQueueBytes");
        positive(readLaneOps, "readLaneOps");
        positive(writeLaneOps, "writeLaneOps");
        positive(maxReadsWhileWriteWaits, "maxReadsWhileWriteWaits");
        positive(hitTableEntries, "hitTableEntries");
        positive(drainTimeoutNanos, "drainTimeoutNanos");
        if (!(ssdRefreshFraction >= 0 && ssdRefreshFraction <= 1)) {
            throw new IllegalArgumentException("ssdRefreshFraction must be in [0, 1]: " + ssdRefreshFraction);
        }
    }

    /**
     * Defaults: 256 MiB / 1024 blocks of seal queue, 1 GiB/s SSD writes with a 64 MiB burst and
     * 256 MiB queued, lanes of 256 reads and 128 writes, K = 8, 64 Ki counted blocks, 10 s drain,
     * extents in the oldest half of the SSD ring refreshed on eviction.
     */
    public static PublishConfig defaults(SsdAdmissionPolicy policy) {
        return new PublishConfig(256L << 20, 1024, policy, 1L << 30, 64L << 20, 256L << 20, 256, 128, 8,
                64 * 1024, TimeUnit.SECONDS.toNanos(10), DEFAULT_SSD_REFRESH_FRACTION);
    }

    public PublishConfig withSealQueue(long bytes, int entries) {
        return new PublishConfig(bytes, entries, policy, writeBytesPerSecond, writeBurstBytes, writeQueueBytes,
                readLaneOps, writeLaneOps, maxReadsWhileWriteWaits, hitTableEntries, drainTimeoutNanos, ssdRefreshFraction);
    }

    public PublishConfig withWriteBudget(long bytesPerSecond, long burstBytes, long queueBytes) {
        return new PublishConfig(sealQueueBytes, sealQueueEntries, policy, bytesPerSecond, burstBytes, queueBytes,
                readLaneOps, writeLaneOps, maxReadsWhileWriteWaits, hitTableEntries, drainTimeoutNanos, ssdRefreshFraction);
    }

    public PublishConfig withLanes(int reads, int writes, int maxReadsWhileWriteWaits) {
        return new PublishConfig(sealQueueBytes, sealQueueEntries, policy, writeBytesPerSecond, writeBurstBytes,
                writeQueueBytes, reads, writes, maxReadsWhileWriteWaits, hitTableEntries, drainTimeoutNanos, ssdRefreshFraction);
    }

    /** This config with the shutdown drain bounded by {@code nanos}. */
    public PublishConfig withDrainTimeoutNanos(long nanos) {
        return new PublishConfig(sealQueueBytes, sealQueueEntries, policy, writeBytesPerSecond, writeBurstBytes,
                writeQueueBytes, readLaneOps, writeLaneOps, maxReadsWhileWriteWaits, hitTableEntries, nanos, ssdRefreshFraction);
    }

    public PublishConfig withSsdRefreshFraction(double fraction) {
        return new PublishConfig(sealQueueBytes, sealQueueEntries, policy, writeBytesPerSecond, writeBurstBytes,
                writeQueueBytes, readLaneOps, writeLaneOps, maxReadsWhileWriteWaits, hitTableEntries, drainTimeoutNanos,
                fraction);
    }

    private static void positive(long v, String name) {
        if (v <= 0) throw new IllegalArgumentException(name + " must be positive: " + v);
    }
}
