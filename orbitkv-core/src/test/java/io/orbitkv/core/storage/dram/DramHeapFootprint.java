package io.orbitkv.core.storage.dram;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.storage.residency.ResidencyStream;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.ref.Reference;
import java.nio.file.Path;
import java.util.List;

/**
 * Measures the heap a {@link DramTier} spends per resident block: index, policy and slot
 * bookkeeping together (keys included, since the index retains them). Fills a tier of 4 KiB
 * slots with {@code blocks} committed images without touching their pages (the arena file stays
 * sparse) and compares the used heap after full GCs before and after.
 *
 * <p>Reusable by benchmarks: {@code DramHeapFootprint.measure(dir, 1_000_000, DramEviction.LRU)}.
 */
public final class DramHeapFootprint {

    /** What was measured. */
    public record Result(int blocks, long heapBytes, long residentImages) {
        public double bytesPerBlock() {
            return (double) heapBytes / blocks;
        }
    }

    private DramHeapFootprint() {
    }

    public static Result measure(Path dir, int blocks, DramEviction eviction) throws IOException {
        long before = usedHeapAfterGc();
        // One spare slot: the reservation budget (one slot) is excluded from Caffeine's bound.
        DramTierConfig config = new DramTierConfig(dir, "footprint", List.of(new SizeClass(4096, blocks + 1)),
                4096, 0, DramTierConfig.DEFAULT_PRESSURE_SCAN_ENTRIES, eviction);
        try (DramTier tier = DramTier.open(config, new ResidencyStream(1024), new SimpleMeterRegistry())) {
            for (int i = 0; i < blocks; i++) {
                if (!(tier.reserve(TestImages.key(i), 1, 4096) instanceof Reservation r)
                        || !(tier.commit(r) instanceof CommitResult.Inserted)) {
                    throw new IllegalStateException("block " + i + " did not become resident");
                }
            }
            tier.runMaintenance();
            long after = usedHeapAfterGc();
            long resident = tier.usage().residentImages();
            Reference.reachabilityFence(tier);
            return new Result(blocks, after - before, resident);
        }
    }

    private static long usedHeapAfterGc() {
        long used = Long.MAX_VALUE;
        for (int i = 0; i < 3; i++) {
            System.gc();
            used = Math.min(used, ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed());
        }
        return used;
    }
}
