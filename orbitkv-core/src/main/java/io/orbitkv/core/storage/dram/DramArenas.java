package io.orbitkv.core.storage.dram;

import io.orbitkv.core.storage.OwnerOnly;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;

/**
 * Owns the arena files of one DRAM tier and their mappings: creates each file at its fixed
 * size, maps it into one shared {@link Arena}, and on {@link #close()} unmaps every mapping at
 * once (deterministically, not at GC) and unlinks the files.
 *
 * <p>Thread model: built and closed by the tier's owner; {@link #segment(int)} may be called
 * from any thread while open. A segment used after close fails with
 * {@link IllegalStateException} (the FFM API's liveness check), never touches unmapped memory.
 *
 * <p>Invariants: {@code segments.get(i)} maps exactly the file of class {@code i}, whose
 * header was written before the constructor returned.
 *
 * <p>Design note: {@code Arena.ofShared()} rather than {@code ofConfined()} because leases are
 * read and reservations written from engine-facing threads other than the one that opened the
 * tier; its close is a handshake with all threads (microseconds), paid once per tier lifetime.
 * Files are created sparse on {@code tmpfs}: capacity is claimed page by page as slots are first
 * written, so a 64 GiB configuration opens in milliseconds.
 */
final class DramArenas implements AutoCloseable {

    private final Arena arena;
    private final List<MemorySegment> segments;
    private final List<Path> files;
    private final ArenaGeometry geometry;

    DramArenas(DramTierConfig config, long incarnation) throws IOException {
        OwnerOnly.createDirectories(config.directory());
        this.arena = Arena.ofShared();
        List<MemorySegment> mapped = new ArrayList<>();
        List<Path> paths = new ArrayList<>();
        List<ArenaGeometry.ClassArena> classes = new ArrayList<>();
        try {
            for (int i = 0; i < config.sizeClasses().size(); i++) {
                SizeClass sizeClass = config.sizeClasses().get(i);
                Path path = DramArenaLayout.fileOf(config.directory(), config.arenaName(), i, sizeClass.slotBytes())
                        .toAbsolutePath();
                long fileBytes = DramArenaLayout.fileBytes(sizeClass);
                paths.add(path);
                MemorySegment segment = createAndMap(path, fileBytes);
                DramArenaLayout.writeHeader(segment, i, sizeClass, incarnation);
                mapped.add(segment);
                classes.add(new ArenaGeometry.ClassArena(i, path.toString(), fileBytes, sizeClass.slotBytes(),
                        sizeClass.slotCount(), DramArenaLayout.FIRST_SLOT_OFFSET));
            }
        } catch (IOException | RuntimeException e) {
            arena.close();
            try {
                unlinkAll(paths);
            } catch (UncheckedIOException suppressed) {
                e.addSuppressed(suppressed);
            }
            throw e;
        }
        this.segments = List.copyOf(mapped);
        this.files = List.copyOf(paths);
        this.geometry = new ArenaGeometry(incarnation, classes);
    }

    private MemorySegment createAndMap(Path path, long fileBytes) throws IOException {
        try (FileChannel channel = OwnerOnly.open(path, StandardOpenOption.CREATE, StandardOpenOption.READ,
                StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING)) {
            // One byte at the end sizes the file without touching (allocating) the pages before it.
            channel.write(ByteBuffer.wrap(new byte[1]), fileBytes - 1);
            return channel.map(FileChannel.MapMode.READ_WRITE, 0, fileBytes, arena);
        }
    }

    /** The whole mapping of class {@code classIndex} (header included). */
    MemorySegment segment(int classIndex) {
        return segments.get(classIndex);
    }

    ArenaGeometry geometry() {
        return geometry;
    }

    /** Unmaps every arena and unlinks the files. */
    @Override
    public void close() {
        arena.close();
        unlinkAll(files);
    }

    private static void unlinkAll(List<Path> paths) {
        UncheckedIOException first = null;
        for (Path p : paths) {
            try {
                Files.deleteIfExists(p);
            } catch (IOException e) {
                if (first == null) first = new UncheckedIOException("cannot unlink arena " + p, e);
            }
        }
        if (first != null) throw first;
    }
}
