package io.orbitkv.bench.storage;

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
import java.util.Arrays;
import java.util.List;

/**
 * Where the time of one {@link DramPutGetBench} operation goes: each step of a put+get+evict
 * (reserve, copy in, commit, acquire, copy out, release, evict) timed on its own, and the
 * baseline's two copies right after, every operation; the medians per step over
 * {@code ops} operations, so a step the scheduler interrupted (the machine is shared) does not
 * count. The row's value is baseline copies / (tier copies + bookkeeping): the ratio
 * {@link DramPutGetBench} would show without preemption noise.
 *
 * <p>Thread model: single-threaded; owns its tier, arena and files for the duration of
 * {@link #run}. The bookkeeping steps run after a copy, as in the benchmark and in the Manager,
 * so they find the tier's state pushed out of the core's caches by the copy (a 256 KiB copy in and
 * out touches 512 KiB, a whole L2); that, not their instruction count, is most of their cost.
 * Run: {@code java -jar orbitkv-bench.jar dram-steps --shm-dir=/dev/shm/orbitkv-bench}.
 */
public final class DramStepProfile {

    /**
     * @param shmDirectory  where the arena and the baseline's buffer file live (tmpfs)
     * @param blockSizes    block sizes, bytes, multiples of 4096
     * @param windows       images kept resident while cycling (as {@link DramPutGetBench}'s window)
     * @param ops           operations per pass; {@value #PASSES} passes, the last one measured
     * @param eviction      the tier's eviction policy (the Manager's default is {@code lru})
     */
    public record Options(Path shmDirectory, List<Integer> blockSizes, List<Integer> windows, int ops,
                          DramEviction eviction) {}

    private static final String[] STEPS = {"reserve", "copy in", "commit", "acquire", "copy out", "release", "evict",
        "baseline copy in", "baseline copy out"};
    /** Passes of {@code ops} operations; all but the last warm the JIT (C2 compiles after ~10 k calls). */
    private static final int PASSES = 6;

    private DramStepProfile() {}

    public static List<BenchRow> run(Options o) throws IOException {
        Files.createDirectories(o.shmDirectory());
        List<BenchRow> rows = new ArrayList<>();
        for (int block : o.blockSizes()) {
            for (int window : o.windows()) rows.add(runOne(o, block, Math.max(DramPutGetBench.MIN_WINDOW, window)));
        }
        return rows;
    }

    private static BenchRow runOne(Options o, int block, int window) throws IOException {
        try (DramBenchRig rig = DramBenchRig.open(o.shmDirectory(), "steps", block, window, o.eviction())) {
            DramTier tier = rig.tier;
            MemorySegment source = rig.source;
            MemorySegment destination = rig.destination;
            MemorySegment middle = rig.middle;
            long[][] nanos = new long[STEPS.length][o.ops()];
            long op = 0;
            for (int pass = 0; pass < PASSES; pass++) { // the last pass is the one kept
                for (int i = 0; i < o.ops(); i++, op++) {
                    StateKey key = rig.key(op);
                    long t0 = System.nanoTime();
                    Reservation r = (Reservation) tier.reserve(key, 1, block);
                    long t1 = System.nanoTime();
                    MemorySegment.copy(source, 0, r.segment(), 0, block);
                    long t2 = System.nanoTime();
                    tier.commit(r);
                    long t3 = System.nanoTime();
                    Lease lease = (Lease) tier.acquire(key, 1);
                    long t4 = System.nanoTime();
                    MemorySegment.copy(lease.segment(), 0, destination, 0, block);
                    long t5 = System.nanoTime();
                    lease.release();
                    long t6 = System.nanoTime();
                    if (op >= window) tier.evict(rig.key(op - window));
                    long t7 = System.nanoTime();
                    long at = (op % (window + 1)) * block;
                    MemorySegment.copy(source, 0, middle, at, block);
                    long t8 = System.nanoTime();
                    MemorySegment.copy(middle, at, destination, 0, block);
                    long t9 = System.nanoTime();
                    long[] marks = {t0, t1, t2, t3, t4, t5, t6, t7, t8, t9};
                    for (int s = 0; s < STEPS.length; s++) nanos[s][i] = marks[s + 1] - marks[s];
                }
            }
            destination.fill((byte) 0);
            try (Lease lease = (Lease) tier.acquire(rig.key(op - 1), 1)) {
                MemorySegment.copy(lease.segment(), 0, destination, 0, block);
            }
            if (destination.mismatch(source) != -1) throw new IllegalStateException("the bytes read back differ from the bytes put");
            long[] median = new long[STEPS.length];
            StringBuilder detail = new StringBuilder();
            for (int s = 0; s < STEPS.length; s++) {
                Arrays.sort(nanos[s]);
                median[s] = nanos[s][o.ops() / 2];
                detail.append(s == 0 ? "" : ", ").append(STEPS[s]).append(' ').append(median[s]);
            }
            long bookkeeping = median[0] + median[2] + median[3] + median[5] + median[6];
            long tierCopies = median[1] + median[4];
            long baseline = median[7] + median[8];
            System.err.printf("dram-steps %d KiB, %d resident: median ns per step: %s; bookkeeping %d ns%n",
                    block >> 10, window, detail, bookkeeping);
            return new BenchRow("DRAM put+get step medians " + DramPutGetBench.size(block) + ", " + o.eviction().word()
                    + ", " + window + " resident",
                    tierCopies + " ns copies + " + bookkeeping + " ns bookkeeping",
                    baseline + " ns (2× MemorySegment.copy)", (double) baseline / (tierCopies + bookkeeping),
                    BenchRow.Target.atLeast(0.9));
        }
    }
}
