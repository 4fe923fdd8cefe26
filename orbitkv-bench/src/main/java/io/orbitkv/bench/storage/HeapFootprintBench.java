package io.orbitkv.bench.storage;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.storage.dram.CommitResult;
import io.orbitkv.core.storage.dram.DramTier;
import io.orbitkv.core.storage.dram.DramTierConfig;
import io.orbitkv.core.storage.dram.Reservation;
import io.orbitkv.core.storage.dram.SizeClass;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.core.storage.ssd.ExtentLayout;
import io.orbitkv.core.storage.ssd.SsdConfig;
import io.orbitkv.core.storage.ssd.SsdStore;
import io.orbitkv.state.NamespaceDigest;

import io.orbitkv.state.unix.FileTrees;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.lang.ref.Reference;
import java.nio.file.FileStore;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Heap bytes per resident block at {@code blocks} blocks of the smallest size (4 KiB): for the
 * DRAM tier (Caffeine index and policy, keys, resident images, slot table together) and,
 * separately, for the SSD store (key → extent index, the ring's per-file offset maps, keys).
 *
 * <p>Single-threaded driver (the SSD fill runs on the store's workers); run each measurement in
 * a fresh JVM with nothing else live, since the figure is a difference of used heap after full
 * collections ({@link java.lang.management.MemoryMXBean}) before and after the inserts.
 *
 * <p>Design note: the DRAM arena is a file of {@code blocks × 4 KiB} (4 GiB at 1 M) in tmpfs,
 * but the benchmark never writes a payload byte, so the file stays sparse and only its header
 * page takes memory. The SSD side cannot avoid writing: every extent is a 4 KiB header plus a
 * 4 KiB payload on disk, 8 GiB at 1 M blocks (plus as much again to preallocate the ring
 * files), which takes about 30 s here; {@code --blocks} trades precision for time.
 * Run: {@code java -Xmx2g -jar orbitkv-bench.jar heap-dram} and {@code ... heap-ssd --dir=var/bench}.
 */
public final class HeapFootprintBench {

    private static final double BUDGET_BYTES = 256;
    private static final int BLOCK_BYTES = 4096;
    private static final long SSD_FILE_BYTES = 1L << 30;
    private static final int SSD_DEPTH = 16;

    private HeapFootprintBench() {}

    /** DRAM tier with one 4 KiB class of {@code blocks + 1} slots, filled with {@code blocks} committed images. */
    public static BenchRow dram(Path shmDirectory, int blocks) throws IOException {
        Files.createDirectories(shmDirectory);
        long before = usedHeapAfterGc();
        // One spare slot: the reservation budget (one slot) is excluded from Caffeine's bound.
        DramTierConfig config = new DramTierConfig(shmDirectory, "heapfootprint",
                List.of(new SizeClass(BLOCK_BYTES, blocks + 1)), BLOCK_BYTES, 0,
                DramTierConfig.DEFAULT_PRESSURE_SCAN_ENTRIES);
        long t0 = System.nanoTime();
        try (DramTier tier = DramTier.open(config, new ResidencyStream(1024), new SimpleMeterRegistry())) {
            for (int i = 0; i < blocks; i++) {
                if (!(tier.reserve(BenchKeys.key(i), 1, BLOCK_BYTES) instanceof Reservation r)
                        || !(tier.commit(r) instanceof CommitResult.Inserted)) {
                    throw new IllegalStateException("block " + i + " did not become resident");
                }
            }
            long after = usedHeapAfterGc();
            long resident = tier.usage().residentImages();
            Reference.reachabilityFence(tier);
            if (resident != blocks) throw new IllegalStateException(resident + " of " + blocks + " blocks resident");
            double perBlock = (after - before) / (double) blocks;
            System.err.printf("heap dram: %d blocks, %.1f B/block, %.1f s%n", blocks, perBlock,
                    (System.nanoTime() - t0) / 1e9);
            return row("Heap per resident block, DRAM tier (index + policy + slots), " + count(blocks),
                    perBlock);
        }
    }

    /** SSD store with 4 KiB payloads, filled with {@code blocks} extents through its write path. */
    public static BenchRow ssd(Path directory, int blocks) throws IOException, InterruptedException {
        long footprint = ExtentLayout.footprintBytes(BLOCK_BYTES);
        long perFile = SSD_FILE_BYTES / footprint;
        int files = (int) ((blocks + perFile - 1) / perFile);
        Path dir = directory.resolve("heap-ssd");
        FileTrees.delete(dir);
        Files.createDirectories(dir);
        FileStore fs = Files.getFileStore(dir);
        long needed = files * SSD_FILE_BYTES;
        if (fs.getUsableSpace() < needed + (1L << 30)) {
            throw new IllegalStateException(dir + " has " + fs.getUsableSpace() + " B free; " + blocks
                    + " blocks need " + needed + " B (pass a smaller --blocks)");
        }
        SsdConfig config = SsdConfig.of(dir).withFiles(files, SSD_FILE_BYTES).withMaxPayloadBytes(BLOCK_BYTES)
                .withIo(SSD_DEPTH, 4 * SSD_DEPTH).withBuffers(1 << 20, 8 << 20);
        long t0 = System.nanoTime();
        try (Arena arena = Arena.ofShared();
             SsdStore store = SsdStore.open(config, new ResidencyStream(1024), new SimpleMeterRegistry())) {
            store.recover();
            MemorySegment payload = arena.allocate(BLOCK_BYTES, ExtentLayout.BLOCK_BYTES);
            payload.fill((byte) 0x5A);
            long before = usedHeapAfterGc();
            SsdLanes.writeRound(store, new NamespaceDigest(1, 2, 3, 4), BenchKeys::key, new AtomicLong(), blocks,
                    new MemorySegment[] {payload}, BLOCK_BYTES, SSD_DEPTH, Long.MAX_VALUE);
            long after = usedHeapAfterGc();
            if (store.size() != blocks) throw new IllegalStateException(store.size() + " of " + blocks + " indexed");
            Reference.reachabilityFence(store);
            double perBlock = (after - before) / (double) blocks;
            System.err.printf("heap ssd: %d blocks, %.1f B/block, %.1f s%n", blocks, perBlock,
                    (System.nanoTime() - t0) / 1e9);
            return row("Heap per resident block, SSD store (index + ring map), " + count(blocks), perBlock);
        } finally {
            FileTrees.delete(dir);
        }
    }

    private static BenchRow row(String name, double perBlock) {
        return new BenchRow(name, BenchRow.fmt(perBlock, 1) + " B", "budget", perBlock,
                BenchRow.Target.atMost(BUDGET_BYTES, "B"));
    }

    private static String count(int blocks) {
        return blocks % 1_000_000 == 0 ? (blocks / 1_000_000) + " M blocks" : blocks + " blocks";
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
