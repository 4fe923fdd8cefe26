package io.orbitkv.client;

import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.unix.UnixSocket;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * The client's shared-memory mappings: the Manager's arenas (whose descriptors the descriptor
 * socket passed after REGISTERED) and the destination regions the client registers, all mapped {@code MAP_SHARED} read-write into one
 * shared {@link Arena}, so closing the client unmaps every one of them at once, deterministically.
 *
 * <p>Thread model: {@link #mapArenas} and {@link #mapRegion} are called by the client's callers
 * under the client's registration lock; segment lookups ({@link #arena}) from any thread read a
 * list published once (volatile). {@link #close} must come after the socket is closed (the Manager
 * may still copy into a region until then) and makes every segment handed out inaccessible.
 *
 * <p>Invariants: the arena list is set once, by the one REGISTERED of the connection; the
 * client writes an arena only inside a granted slot ({@link OrbitKvClient#publish}) and hands out
 * leased pages read-only. Regions are bounded by the Manager's {@code maxRegionsPerConnection}.
 *
 * <p>Design note: one {@code Arena.ofShared()} for every mapping rather than one per file: the
 * mappings live exactly as long as the connection, and a shared arena lets the reader thread,
 * the publishing thread and the engine's threads all touch them (a confined arena would not).
 */
final class SharedMappings implements AutoCloseable {

    private final Arena arena = Arena.ofShared();
    private volatile List<MemorySegment> arenas = List.of();

    /**
     * Maps every arena of REGISTERED read-write, in order, from {@code fds} (the descriptors the
     * descriptor socket passed, same order; closed here once mapped, the mappings stay); index
     * {@code i} is arena index {@code i}.
     */
    void mapArenas(List<Reply.ArenaFile> files, int[] fds) throws IOException {
        if (!arenas.isEmpty()) throw new IllegalStateException("arenas are mapped once per connection");
        if (fds.length != files.size()) throw new IllegalArgumentException(fds.length + " descriptors for " + files.size() + " arenas");
        List<MemorySegment> mapped = new ArrayList<>(files.size());
        try {
            for (int i = 0; i < fds.length; i++) {
                Reply.ArenaFile f = files.get(i);
                // /proc/self/fd/N reaches the received memfd itself; it is this process's own descriptor
                try (FileChannel ch = FileChannel.open(Path.of("/proc/self/fd/" + fds[i]), StandardOpenOption.READ,
                        StandardOpenOption.WRITE)) {
                    if (ch.size() < f.sizeBytes()) {
                        throw new IOException("arena " + i + " is " + ch.size() + " bytes, REGISTERED says " + f.sizeBytes());
                    }
                    mapped.add(ch.map(FileChannel.MapMode.READ_WRITE, 0, f.sizeBytes(), arena));
                }
            }
        } finally {
            for (int fd : fds) UnixSocket.close(fd);
        }
        arenas = List.copyOf(mapped);
    }

    /**
     * Creates anonymous shared memory of {@code sizeBytes} (a memfd, on no file system), maps it
     * read-write and returns its descriptor (the caller hands it over and closes it) with the mapping.
     */
    PrivateRegion mapPrivateRegion(String name, long sizeBytes) throws IOException {
        int fd = UnixSocket.memfd(name, sizeBytes);
        if (fd < 0) throw new IOException("memfd_create failed: errno " + -fd);
        try (FileChannel ch = FileChannel.open(Path.of("/proc/self/fd/" + fd), StandardOpenOption.READ,
                StandardOpenOption.WRITE)) {
            return new PrivateRegion(fd, ch.map(FileChannel.MapMode.READ_WRITE, 0, sizeBytes, arena));
        } catch (IOException | RuntimeException e) {
            UnixSocket.close(fd);
            throw e;
        }
    }

    /** A memfd region's descriptor (the caller's to close) and its mapping (this object's). */
    record PrivateRegion(int fd, MemorySegment mapping) {
    }

    /**
     * Maps the destination file {@code path} read-write, creating it or growing it to
     * {@code sizeBytes} first when it is smaller (a new file in {@code /dev/shm} is zero-filled).
     */
    MemorySegment mapRegion(Path path, long sizeBytes) throws IOException {
        Objects.requireNonNull(path, "path");
        if (!Files.exists(path)) Files.createFile(path);
        try (RandomAccessFile file = new RandomAccessFile(path.toFile(), "rw")) {
            if (file.length() < sizeBytes) file.setLength(sizeBytes);
        }
        try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            return ch.map(FileChannel.MapMode.READ_WRITE, 0, sizeBytes, arena);
        }
    }

    /** The mapping of arena {@code index}; throws IndexOutOfBoundsException for an index REGISTERED did not name. */
    MemorySegment arena(int index) {
        List<MemorySegment> mapped = arenas;
        Objects.checkIndex(index, mapped.size());
        return mapped.get(index);
    }

    /** Unmaps everything; segments handed out become inaccessible. */
    @Override
    public void close() {
        arena.close();
    }
}
