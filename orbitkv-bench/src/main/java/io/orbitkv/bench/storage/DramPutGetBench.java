package io.orbitkv.bench.storage;

import io.orbitkv.bench.Throughput;
import io.orbitkv.core.storage.dram.AcquireResult;
import io.orbitkv.core.storage.dram.CommitResult;
import io.orbitkv.core.storage.dram.DramTier;
import io.orbitkv.core.storage.dram.DramEviction;
import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.core.storage.dram.Reservation;
import io.orbitkv.state.StateKey;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * DRAM tier put+get against raw {@link MemorySegment#copy} of the same bytes.
 *
 * <p>One subject operation is a put (reserve a slot, copy the block in, commit) and a get
 * (acquire a lease, copy the block out, release), followed by the explicit eviction of the key
 * put {@code residentWindow} operations earlier, so the tier holds a steady window of resident
 * images and its LIFO free stack cycles through {@code residentWindow + 1} slots. The baseline
 * does the same two copies (source → shared-memory buffer → destination) through
 * {@code residentWindow + 1} buffers of a file mapped from the same directory, so both sides
 * touch the same amount of the same kind of memory; the ratio isolates the tier's bookkeeping
 * (Caffeine index, slot table, lease, residency event).
 *
 * <p>Thread model: single-threaded; owns its tier, arena and files for the duration of
 * {@link #run}. Invariant: at most {@code residentWindow + 1} images are resident, so Caffeine's
 * bound (sized to {@code residentWindow + 3} slots) never evicts and every get hits.
 *
 * <p>Design note: the bookkeeping is a fixed cost per put+get+evict, so the ratio depends on how
 * long the copies take. It is ~0.5 µs of CPU with the tier's state in cache (4 KiB blocks), but
 * 1.5–2.5 µs at 256 KiB, where every step runs after a copy that pushed that state out of the
 * core's caches ({@link DramStepProfile} times each step; commit and evict, Caffeine's two writes,
 * are two thirds or more of it). With the slots in cache (a few resident images) a 256 KiB
 * copy runs at ~35 GB/s (~7 µs for both) and the ratio is ~0.8; with a resident set larger than
 * the last-level cache (32 MiB here), as in any real tier of gigabytes, the slot side of each copy
 * comes from DRAM and the ratio rises. Both are reported. Rounds move 512 MiB per side, 21
 * rounds, median of per-round ratios ({@link Throughput}).
 * Run: {@code java -jar orbitkv-bench.jar dram --shm-dir=/dev/shm/orbitkv-bench}.
 */
public final class DramPutGetBench {

    /**
     * @param shmDirectory   where the arena and the baseline's buffer file live (tmpfs)
     * @param blockSizes     block sizes to measure, bytes, multiples of 4096
     * @param residentBytes  per configuration, the bytes of images kept resident while the
     *                       benchmark cycles (at least {@value #MIN_WINDOW} images): small = slots
     *                       stay in cache, larger than the last-level cache = slots come from DRAM
     * @param rounds         paired rounds per configuration
     * @param bytesPerRound  bytes each side moves per round (two copies count twice)
     * @param eviction       the tier's eviction policy (the Manager's default is {@code lru})
     */
    public record Options(Path shmDirectory, List<Integer> blockSizes, List<Long> residentBytes, int rounds,
                          long bytesPerRound, DramEviction eviction) {}

    /** Fewest images kept resident. */
    static final int MIN_WINDOW = 4;

    private static final double TARGET_RATIO = 0.9;

    private DramPutGetBench() {}

    public static List<BenchRow> run(Options options) throws IOException {
        Files.createDirectories(options.shmDirectory());
        List<BenchRow> rows = new ArrayList<>();
        for (int blockBytes : options.blockSizes()) {
            for (long resident : options.residentBytes()) {
                rows.add(runOne(options, blockBytes, (int) Math.max(MIN_WINDOW, resident / blockBytes)));
            }
        }
        return rows;
    }

    private static BenchRow runOne(Options o, int blockBytes, int window) throws IOException {
        try (DramBenchRig rig = DramBenchRig.open(o.shmDirectory(), "bench", blockBytes, window, o.eviction())) {
            long[] subjectOps = {0};
            long[] baselineOps = {0};
            int opsPerRound = (int) Math.max(8, o.bytesPerRound() / (2L * blockBytes));
            Throughput.Paired p = Throughput.paired(
                    () -> putGetEvict(rig, subjectOps[0]++, window),
                    () -> copyTwice(rig, baselineOps[0]++, window),
                    opsPerRound * 2, opsPerRound, o.rounds());
            rig.destination.fill((byte) 0);
            putGetEvict(rig, subjectOps[0]++, window);
            if (rig.destination.mismatch(rig.source) != -1) {
                throw new IllegalStateException("the bytes read back differ from the bytes put");
            }
            System.err.printf("dram %d KiB, %d resident: tier %.2f GB/s, copy %.2f GB/s, ratio %.3f (%d rounds of %d ops)%n",
                    blockBytes >> 10, window, p.subjectRate(), p.baselineRate(), p.ratio(), p.rounds(), opsPerRound);
            long residentMib = ((long) window * blockBytes) >> 20;
            return new BenchRow("DRAM put+get " + size(blockBytes) + ", " + o.eviction().word() + ", " + window + " resident ("
                            + (residentMib > 0 ? residentMib + " MiB" : ((long) window * blockBytes >> 10) + " KiB") + ")",
                    BenchRow.fmt(p.subjectRate(), 2) + " GB/s",
                    BenchRow.fmt(p.baselineRate(), 2) + " GB/s (2× MemorySegment.copy)",
                    p.ratio(), BenchRow.Target.atLeast(TARGET_RATIO));
        }
    }

    /** One put, one get, one eviction of the image put {@code window} operations ago; returns the bytes copied. */
    private static long putGetEvict(DramBenchRig rig, long op, int window) {
        DramTier tier = rig.tier;
        MemorySegment source = rig.source;
        StateKey key = rig.key(op);
        int length = (int) source.byteSize();
        if (!(tier.reserve(key, 1, length) instanceof Reservation reservation)) {
            throw new IllegalStateException("reserve failed at op " + op + ": " + tier.usage());
        }
        MemorySegment.copy(source, 0, reservation.segment(), 0, length);
        if (!(tier.commit(reservation) instanceof CommitResult.Inserted)) {
            throw new IllegalStateException("commit did not insert at op " + op);
        }
        AcquireResult acquired = tier.acquire(key, 1);
        if (!(acquired instanceof Lease lease)) throw new IllegalStateException("get missed at op " + op);
        MemorySegment.copy(lease.segment(), 0, rig.destination, 0, length);
        lease.release();
        if (op >= window && !tier.evict(rig.key(op - window))) {
            throw new IllegalStateException("eviction found nothing at op " + op);
        }
        return 2L * length;
    }

    private static long copyTwice(DramBenchRig rig, long op, int window) {
        long length = rig.source.byteSize();
        long at = (op % (window + 1)) * length;
        MemorySegment.copy(rig.source, 0, rig.middle, at, length);
        MemorySegment.copy(rig.middle, at, rig.destination, 0, length);
        return 2L * length;
    }

    static String size(int bytes) {
        return bytes >= 1 << 20 && bytes % (1 << 20) == 0 ? (bytes >> 20) + " MiB" : (bytes >> 10) + " KiB";
    }
}
