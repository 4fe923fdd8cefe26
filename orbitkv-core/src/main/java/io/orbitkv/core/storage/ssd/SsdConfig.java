package io.orbitkv.core.storage.ssd;

import java.nio.file.Path;
import java.util.Objects;
import java.util.concurrent.TimeUnit;

/**
 * Budgets and switches of one {@link SsdStore}. Immutable; validated on construction.
 *
 * @param directory               where the extent files live (created if missing)
 * @param fileCount               number of ring files
 * @param fileSizeBytes           size of each file once preallocated; multiple of 4096
 * @param maxPayloadBytes         largest payload one extent may carry; bounds the per-worker
 *                                bounce buffers ({@code ioThreads × (4096 + padded max)} bytes)
 * @param ioThreads               worker threads doing the reads and writes
 * @param maxQueuedOps            operations that may wait for a worker; one more is {@code Busy}
 * @param pinnedWaitNanos         how long the ring writer waits for one pinned extent to be
 *                                unpinned before skipping past it
 * @param allowBufferedFallback   use buffered I/O where the filesystem refuses O_DIRECT;
 *                                when false, such a directory fails {@link SsdStore#open}
 * @param recoveryScanBufferBytes the one buffer the restart scan reads through; multiple of 4096
 * @param preallocChunkBytes      zero-fill write size used to preallocate a file; multiple of 4096
 * @param readPath                which route serves reads; {@link ReadPath#URING} fails
 *                                {@link SsdStore#open} when io_uring is unavailable
 * @param uringInflightReads      reads in flight on the io_uring route at most (each holds a
 *                                4 KiB header buffer and an extent pin); one more is {@code Busy}
 */
public record SsdConfig(
        Path directory,
        int fileCount,
        long fileSizeBytes,
        int maxPayloadBytes,
        int ioThreads,
        int maxQueuedOps,
        long pinnedWaitNanos,
        boolean allowBufferedFallback,
        int recoveryScanBufferBytes,
        int preallocChunkBytes,
        ReadPath readPath,
        int uringInflightReads) {

    public SsdConfig {
        Objects.requireNonNull(directory, "directory");
        requirePositive(fileCount, "fileCount");
        requireBlockMultiple(fileSizeBytes, "fileSizeBytes");
        requirePositive(maxPayloadBytes, "maxPayloadBytes");
        requirePositive(ioThreads, "ioThreads");
        requirePositive(maxQueuedOps, "maxQueuedOps");
        if (pinnedWaitNanos < 0) throw new IllegalArgumentException("pinnedWaitNanos must be >= 0");
        requireBlockMultiple(recoveryScanBufferBytes, "recoveryScanBufferBytes");
        requireBlockMultiple(preallocChunkBytes, "preallocChunkBytes");
        Objects.requireNonNull(readPath, "readPath");
        requirePositive(uringInflightReads, "uringInflightReads");
        if (uringInflightReads > 4096) throw new IllegalArgumentException("uringInflightReads must be <= 4096: " + uringInflightReads);
        if (ExtentLayout.footprintBytes(maxPayloadBytes) > fileSizeBytes) {
            throw new IllegalArgumentException("an extent of maxPayloadBytes=" + maxPayloadBytes
                    + " (footprint " + ExtentLayout.footprintBytes(maxPayloadBytes) + " B) does not fit a file of "
                    + fileSizeBytes + " B");
        }
    }

    /**
     * Defaults for a store in {@code directory}: 4 files of 64 MiB, 2 MiB payloads, 4 workers,
     * 256 queued operations, 50 ms pinned wait, O_DIRECT required, 1 MiB scan buffer, read path
     * {@link ReadPath#AUTO} with 64 io_uring reads in flight (64 × 2 MiB covers a 128 MiB burst
     * of restores, and 64 × 4 KiB of header buffers is 256 KiB).
     */
    public static SsdConfig of(Path directory) {
        return new SsdConfig(directory, 4, 64L << 20, 2 << 20, 4, 256,
                TimeUnit.MILLISECONDS.toNanos(50), false, 1 << 20, 1 << 20, ReadPath.AUTO, 64);
    }

    public SsdConfig withReadPath(ReadPath path) {
        return new SsdConfig(directory, fileCount, fileSizeBytes, maxPayloadBytes, ioThreads, maxQueuedOps,
                pinnedWaitNanos, allowBufferedFallback, recoveryScanBufferBytes, preallocChunkBytes, path,
                uringInflightReads);
    }

    public SsdConfig withUringInflightReads(int reads) {
        return new SsdConfig(directory, fileCount, fileSizeBytes, maxPayloadBytes, ioThreads, maxQueuedOps,
                pinnedWaitNanos, allowBufferedFallback, recoveryScanBufferBytes, preallocChunkBytes, readPath, reads);
    }

    public SsdConfig withFiles(int count, long sizeBytes) {
        return new SsdConfig(directory, count, sizeBytes, maxPayloadBytes, ioThreads, maxQueuedOps,
                pinnedWaitNanos, allowBufferedFallback, recoveryScanBufferBytes, preallocChunkBytes, readPath, uringInflightReads);
    }

    public SsdConfig withMaxPayloadBytes(int bytes) {
        return new SsdConfig(directory, fileCount, fileSizeBytes, bytes, ioThreads, maxQueuedOps,
                pinnedWaitNanos, allowBufferedFallback, recoveryScanBufferBytes, preallocChunkBytes, readPath, uringInflightReads);
    }

    public SsdConfig withIo(int threads, int queuedOps) {
        return new SsdConfig(directory, fileCount, fileSizeBytes, maxPayloadBytes, threads, queuedOps,
                pinnedWaitNanos, allowBufferedFallback, recoveryScanBufferBytes, preallocChunkBytes, readPath, uringInflightReads);
    }

    public SsdConfig withPinnedWaitNanos(long nanos) {
        return new SsdConfig(directory, fileCount, fileSizeBytes, maxPayloadBytes, ioThreads, maxQueuedOps,
                nanos, allowBufferedFallback, recoveryScanBufferBytes, preallocChunkBytes, readPath, uringInflightReads);
    }

    public SsdConfig withBufferedFallback(boolean allow) {
        return new SsdConfig(directory, fileCount, fileSizeBytes, maxPayloadBytes, ioThreads, maxQueuedOps,
                pinnedWaitNanos, allow, recoveryScanBufferBytes, preallocChunkBytes, readPath, uringInflightReads);
    }

    public SsdConfig withBuffers(int recoveryScanBytes, int preallocChunk) {
        return new SsdConfig(directory, fileCount, fileSizeBytes, maxPayloadBytes, ioThreads, maxQueuedOps,
                pinnedWaitNanos, allowBufferedFallback, recoveryScanBytes, preallocChunk, readPath, uringInflightReads);
    }

    /** Total ring capacity in bytes when every file is preallocated. */
    public long capacityBytes() {
        return fileCount * fileSizeBytes;
    }

    private static void requirePositive(long v, String name) {
        if (v <= 0) throw new IllegalArgumentException(name + " must be positive: " + v);
    }

    private static void requireBlockMultiple(long v, String name) {
        requirePositive(v, name);
        if (v % ExtentLayout.BLOCK_BYTES != 0) {
            throw new IllegalArgumentException(name + " must be a multiple of 4096: " + v);
        }
    }
}
