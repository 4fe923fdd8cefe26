package io.orbitkv.bench.storage;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.storage.dram.DramEviction;
import io.orbitkv.core.storage.dram.DramTier;
import io.orbitkv.core.storage.dram.DramTierConfig;
import io.orbitkv.core.storage.dram.SizeClass;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.state.StateKey;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;

/**
 * What {@link DramPutGetBench} and {@link DramStepProfile} both measure on: a DRAM tier of one size
 * class with room for {@code window} resident images (+ 4 slots), a source block with a
 * per-word pattern, a destination block, the baseline's middle buffer of {@code window + 1} blocks
 * mapped from a tmpfs file (as the tier's arena is), and a ring of {@link #KEY_RING} keys.
 *
 * <p>Thread model: confined to the thread that opened it; {@link #close()} closes the tier, the
 * buffers and deletes the baseline's file.
 */
final class DramBenchRig implements AutoCloseable {

    static final int KEY_RING = 1024;

    final DramTier tier;
    final MemorySegment source;
    final MemorySegment destination;
    final MemorySegment middle;
    final StateKey[] keys = new StateKey[KEY_RING];
    private final Arena arena;
    private final FileChannel baselineChannel;
    private final Path baselineFile;

    private DramBenchRig(DramTier tier, Arena arena, FileChannel baselineChannel, Path baselineFile, int block, int window)
            throws IOException {
        this.tier = tier;
        this.arena = arena;
        this.baselineChannel = baselineChannel;
        this.baselineFile = baselineFile;
        this.source = arena.allocate(block, 4096);
        for (long i = 0; i < block; i += 8) source.set(ValueLayout.JAVA_LONG, i, BenchKeys.mix(i));
        this.destination = arena.allocate(block, 4096);
        this.middle = baselineChannel.map(FileChannel.MapMode.READ_WRITE, 0, (long) block * (window + 1), arena);
        for (int i = 0; i < KEY_RING; i++) keys[i] = BenchKeys.key(i);
    }

    /** A rig named {@code name} under {@code shmDirectory} for blocks of {@code block} bytes. */
    static DramBenchRig open(Path shmDirectory, String name, int block, int window, DramEviction eviction) throws IOException {
        DramTierConfig config = new DramTierConfig(shmDirectory, name + (block >> 10) + "k",
                List.of(new SizeClass(block, window + 4)), block, 0, DramTierConfig.DEFAULT_PRESSURE_SCAN_ENTRIES,
                eviction);
        Path baselineFile = shmDirectory.resolve(name + "-baseline-" + (block >> 10) + "k.buf");
        Arena arena = Arena.ofConfined();
        DramTier tier = null;
        FileChannel channel = null;
        try {
            tier = DramTier.open(config, new ResidencyStream(1024), new SimpleMeterRegistry());
            channel = FileChannel.open(baselineFile, StandardOpenOption.CREATE, StandardOpenOption.READ,
                    StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING);
            return new DramBenchRig(tier, arena, channel, baselineFile, block, window);
        } catch (IOException | RuntimeException e) {
            if (channel != null) channel.close();
            if (tier != null) tier.close();
            arena.close();
            Files.deleteIfExists(baselineFile);
            throw e;
        }
    }

    /** The key of operation {@code op}. */
    StateKey key(long op) {
        return keys[(int) (op % KEY_RING)];
    }

    @Override
    public void close() throws IOException {
        try {
            tier.close();
            baselineChannel.close();
        } finally {
            arena.close();
            Files.deleteIfExists(baselineFile);
        }
    }
}
