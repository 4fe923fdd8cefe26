package io.orbitkv.core.transfer;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Objects;

/**
 * An engine's destination region for ENGINE_RESTORE: its shared-memory file mapped read-write
 * into a shared {@link Arena} that this object owns, holding {@code pageCount} pages of
 * {@code pageBytes}, page {@code j} at byte {@code j·pageBytes}.
 *
 * <p>Thread model: the mapping may be written by several copy threads at once (distinct pages);
 * {@link #close()} unmaps it and must only be called once no copy into it can still run (the
 * session closes regions after its operations drained), since unmapping under a running copy
 * would make that copy fail rather than corrupt memory, but would abandon submitted I/O.
 *
 * <p>Design note: {@code FileChannel.map(..., arena)} rather than a {@code MappedByteBuffer},
 * so unmapping is deterministic (at {@link #close()}), not left to the garbage collector while
 * the client may already have deleted and reused the file.
 */
public final class EngineRegion implements AutoCloseable {

    /** Outcome of {@link #open}. */
    public sealed interface Opening {
    }

    /** The region is mapped. */
    public record Opened(EngineRegion region) implements Opening {
    }

    /** The file cannot be opened or mapped, or is smaller than declared. */
    public record NotFound(String reason) implements Opening {
    }

    private final Path path;
    private final int pageBytes;
    private final int pageCount;
    private final Arena arena;
    private final MemorySegment segment;
    private volatile boolean faulted;

    private EngineRegion(Path path, int pageBytes, int pageCount, Arena arena, MemorySegment segment) {
        this.path = path;
        this.pageBytes = pageBytes;
        this.pageCount = pageCount;
        this.arena = arena;
        this.segment = segment;
    }

    /**
     * Maps {@code sizeBytes} of the file at {@code path} with no access check; never throws for a
     * bad path or file. The Manager opens regions through {@link RegionDirectory}, which checks
     * who may write where; this is the mapping step it ends with, open to this package's tests.
     */
    static Opening open(String path, long sizeBytes, int pageBytes, int pageCount) {
        Objects.requireNonNull(path, "path");
        Path file;
        try {
            file = Path.of(path);
        } catch (InvalidPathException e) {
            return new NotFound("bad path: " + e.getMessage());
        }
        if (!file.isAbsolute()) return new NotFound("path is not absolute: " + path);
        return map(file, file, sizeBytes, pageBytes, pageCount);
    }

    /**
     * Maps {@code sizeBytes} of {@code file} (a path or a {@code /proc/self/fd/N} link) read-write;
     * {@code shown} is the path the region is known by in logs.
     */
    static Opening map(Path file, Path shown, long sizeBytes, int pageBytes, int pageCount) {
        Arena arena = Arena.ofShared();
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            long size = channel.size();
            if (size < sizeBytes) {
                arena.close();
                return new NotFound("file " + shown + " has " + size + " bytes, less than size_bytes " + sizeBytes);
            }
            MemorySegment segment = channel.map(FileChannel.MapMode.READ_WRITE, 0, sizeBytes, arena);
            return new Opened(new EngineRegion(shown, pageBytes, pageCount, arena, segment));
        } catch (IOException | UnsupportedOperationException | SecurityException e) {
            arena.close();
            return new NotFound("cannot map " + shown + ": " + e.getMessage());
        }
    }

    /**
     * Marks the region unusable: a copy into it faulted (the engine truncated or replaced its file
     * after REGISTER_REGION, so the mapping no longer has pages behind it). Later RESTOREs into it
     * are refused; the mapping stays until the session drains, as every region's does.
     */
    public void markFaulted() {
        faulted = true;
    }

    /** True once a copy into this region faulted; see {@link #markFaulted}. */
    public boolean isFaulted() {
        return faulted;
    }

    public int pageBytes() {
        return pageBytes;
    }

    public int pageCount() {
        return pageCount;
    }

    public Path path() {
        return path;
    }

    /** The first {@code lengthBytes} of destination page {@code page}. */
    public MemorySegment page(int page, int lengthBytes) {
        Objects.checkIndex(page, pageCount);
        if (lengthBytes > pageBytes) throw new IllegalArgumentException(lengthBytes + " bytes exceed the page");
        return segment.asSlice((long) page * pageBytes, lengthBytes);
    }

    /** Unmaps the file. Idempotent. */
    @Override
    public void close() {
        if (arena.scope().isAlive()) arena.close();
    }
}
