package io.orbitkv.core.storage.ssd;

import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Owns placement: the write head, the generation counter, which files are preallocated, and a
 * per-file map of the extents that occupy each byte range. Decides where the next extent goes
 * and which older extents it claims.
 *
 * <p>Thread model: every placement runs under {@code reservationLock}, so there is one logical
 * ring writer even though placements come from several I/O workers; the I/O itself happens
 * outside the lock (the placed extent is pinned by its writer until the write completes, so a
 * later lap cannot claim an in-flight range). Readers never take {@code reservationLock}; the
 * only lock they may touch is {@code pinLock}, to signal a waiting writer when they drop the
 * last pin of an extent.
 *
 * <p>Invariants (under {@code reservationLock}): extents in one file's map never overlap; every
 * extent in a map lies inside {@code [0, fileSizeBytes)} of a preallocated file; generations
 * handed out are strictly increasing and greater than any found at recovery; an extent is
 * removed from a map only after {@link Extent#tryRetire()} succeeded, i.e. with no pin.
 *
 * <p>Design note: a pinned extent in the way costs the writer at most {@code pinnedWaitNanos}
 * (default 50 ms, about the time of a few 2 MiB reads at SSD speed) on a condition signalled by
 * the last unpin, then the head jumps past it and the skipped bytes stay unused for one lap.
 * Waiting forever would let one stuck lease stop all SSD admission; skipping at once would waste
 * ring space whenever a read merely overlaps the head. A placement gives up with
 * {@link Placement.RingFull} after the head has travelled one full ring without finding room.
 */
final class ExtentRing {

    /** Outcome of asking for room. */
    sealed interface Placement {
        /** Room found: {@code extent} is placed and pinned by the writer; {@code claimed} were overwritten. */
        record Placed(Extent extent, List<Extent> claimed) implements Placement {}
        /** The next file could not be preallocated: the disk is full. */
        record NoSpace() implements Placement {}
        /** A whole lap found only pinned extents. */
        record RingFull() implements Placement {}
    }

    private final ExtentFiles files;
    private final long fileSizeBytes;
    private final long pinnedWaitNanos;
    private final MemorySegment zeros;
    private final SsdMetrics metrics;

    private final ReentrantLock reservationLock = new ReentrantLock();
    private final ReentrantLock pinLock = new ReentrantLock();
    private final Condition unpinned = pinLock.newCondition();

    // @GuardedBy("reservationLock")
    private final List<TreeMap<Long, Extent>> byFile;
    // @GuardedBy("reservationLock")
    private final boolean[] preallocated;
    // written under reservationLock; volatile so metric scrapes never wait behind a pinned-extent wait
    private volatile int usableFiles;
    // @GuardedBy("reservationLock")
    private int headFile;
    // @GuardedBy("reservationLock")
    private long headOffset;
    // @GuardedBy("reservationLock")
    private long lastGeneration;
    // headFile * fileSizeBytes + headOffset, written under reservationLock after each placement; read
    // without it by bytesAhead (a hint for refreshing old extents, never for correctness)
    private volatile long headPosition;

    /**
     * @param zeros a zero-filled, 4 KiB-aligned buffer owned by the store, used to preallocate
     */
    ExtentRing(ExtentFiles files, SsdConfig config, MemorySegment zeros, SsdMetrics metrics, ScanResult recovered) {
        this.files = files;
        this.fileSizeBytes = config.fileSizeBytes();
        this.pinnedWaitNanos = config.pinnedWaitNanos();
        this.zeros = zeros;
        this.metrics = metrics;
        this.byFile = new ArrayList<>(files.fileCount());
        for (int i = 0; i < files.fileCount(); i++) byFile.add(new TreeMap<>());
        for (Extent e : recovered.live()) byFile.get(e.file).put(e.offset, e);
        this.preallocated = recovered.preallocated().clone();
        this.usableFiles = files.fileCount();
        this.headFile = recovered.report().resumeFile();
        this.headOffset = recovered.report().resumeOffset();
        this.lastGeneration = recovered.report().maxGeneration();
        this.headPosition = headFile * fileSizeBytes + headOffset;
    }

    /**
     * How many ring bytes the head will write before it reaches {@code e}: small for the oldest
     * extents (the next to be overwritten), close to {@link #usableBytes()} for the newest. A racy
     * read of the head, for choosing what to rewrite; 0 for an extent outside the usable files.
     */
    long bytesAhead(Extent e) {
        long ring = usableBytes();
        if (e.file >= usableFiles || ring <= 0) return 0;
        long distance = e.file * fileSizeBytes + e.offset - headPosition;
        return distance >= 0 ? distance : distance + ring;
    }

    /** Bytes the ring may currently use (shrinks when a file could not be preallocated). */
    long usableBytes() {
        return usableFiles * fileSizeBytes;
    }

    /**
     * Finds room for an extent of {@code payloadBytes}, claims (retires) the extents in that
     * range, and places a new extent there with the next generation, pinned once for its writer.
     * May wait up to {@code pinnedWaitNanos} per pinned extent in the way.
     */
    Placement place(NamespaceDigest namespace, StateKey key, int payloadBytes, int payloadCrc32c) throws IOException {
        long footprint = ExtentLayout.footprintBytes(payloadBytes);
        reservationLock.lock();
        try {
            long travelled = 0;
            for (;;) {
                if (travelled > usableFiles * fileSizeBytes) return new Placement.RingFull();
                if (headOffset + footprint > fileSizeBytes) {
                    travelled += fileSizeBytes - headOffset;
                    headFile = headFile + 1 < usableFiles ? headFile + 1 : 0;
                    headOffset = 0;
                    continue;
                }
                if (!preallocated[headFile]) {
                    if (!files.preallocate(headFile, zeros)) {
                        if (headFile > 0) {
                            usableFiles = headFile; // later laps stay inside the files that exist
                            headFile = 0;
                            headOffset = 0;
                        }
                        return new Placement.NoSpace();
                    }
                    preallocated[headFile] = true;
                }
                List<Extent> inTheWay = overlapping(headFile, headOffset, headOffset + footprint);
                Extent blocker = claimAll(inTheWay);
                if (blocker != null) {
                    metrics.pinnedSkip();
                    travelled += blocker.endOffset() - headOffset;
                    headOffset = blocker.endOffset();
                    continue;
                }
                TreeMap<Long, Extent> map = byFile.get(headFile);
                for (Extent e : inTheWay) map.remove(e.offset);
                Extent placed = new Extent(namespace, key, headFile, headOffset, payloadBytes, payloadCrc32c,
                        ++lastGeneration, 1);
                map.put(headOffset, placed);
                headOffset += footprint;
                headPosition = headFile * fileSizeBytes + headOffset;
                return new Placement.Placed(placed, List.copyOf(inTheWay));
            }
        } finally {
            reservationLock.unlock();
        }
    }

    /** Called after the last pin of any extent was dropped: wakes a writer waiting for it. */
    void onLastUnpin() {
        pinLock.lock();
        try {
            unpinned.signalAll();
        } finally {
            pinLock.unlock();
        }
    }

    // @GuardedBy("reservationLock")
    private List<Extent> overlapping(int file, long start, long end) {
        TreeMap<Long, Extent> map = byFile.get(file);
        List<Extent> out = new ArrayList<>();
        Map.Entry<Long, Extent> before = map.lowerEntry(start);
        if (before != null && before.getValue().endOffset() > start) out.add(before.getValue());
        out.addAll(map.subMap(start, true, end, false).values());
        return out;
    }

    /** Retires every extent in order; on the first that stays pinned, un-retires the earlier ones and returns it. */
    private Extent claimAll(List<Extent> inTheWay) {
        for (int i = 0; i < inTheWay.size(); i++) {
            Extent e = inTheWay.get(i);
            if (!retireWithinBudget(e)) {
                for (int j = 0; j < i; j++) inTheWay.get(j).unretire();
                return e;
            }
        }
        return null;
    }

    private boolean retireWithinBudget(Extent e) {
        if (e.tryRetire()) return true;
        metrics.pinnedWait();
        long deadline = System.nanoTime() + pinnedWaitNanos;
        pinLock.lock();
        try {
            for (;;) {
                if (e.tryRetire()) return true;
                long left = deadline - System.nanoTime();
                if (left <= 0) return false;
                unpinned.awaitNanos(left);
            }
        } catch (InterruptedException ie) {
            Thread.currentThread().interrupt();
            return false;
        } finally {
            pinLock.unlock();
        }
    }

    /** Extents currently placed (live, dead or in flight), for invariant checks in tests. */
    List<Extent> placedExtents() {
        reservationLock.lock();
        try {
            List<Extent> out = new ArrayList<>();
            for (TreeMap<Long, Extent> m : byFile) out.addAll(m.values());
            return out;
        } finally {
            reservationLock.unlock();
        }
    }
}
