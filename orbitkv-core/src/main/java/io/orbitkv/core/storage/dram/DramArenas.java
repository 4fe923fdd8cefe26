package io.orbitkv.core.storage.dram;

import io.orbitkv.core.fd.Posix;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Owns the DRAM tier's arenas: per namespace, one anonymous shared-memory file ({@code memfd})
 * per size class, its descriptor and its mapping. A namespace's arenas are created the first time
 * the namespace needs them ({@link #arenasFor}); every mapping is unmapped at once on
 * {@link #close()} and every descriptor closed. Nothing is ever created on a file system.
 *
 * <p>Thread model: {@link #arenasFor} creates under {@code lock} and publishes through a
 * {@link ConcurrentHashMap} (and, for small ids, a copy-on-write array), so {@link #segment}, {@link #punch} and {@link #allocatedBytes}
 * may run on any thread without locking once the namespace's arenas exist. A segment used after
 * close fails with {@link IllegalStateException} (the FFM API's liveness check), never touches
 * unmapped memory.
 *
 * <p>Invariants: at most {@code maxNamespaces} namespaces have arenas; every namespace's memfd of
 * class {@code c} has the same size and layout ({@link DramArenaLayout}), so slot {@code i} of
 * class {@code c} is at the same offset in each; the slot's bytes are written only in the memfd of
 * the namespace that holds the slot now (the tier punches the previous owner's pages out when a
 * slot changes namespace), so allocated memory stays within one tier capacity, however many
 * namespaces there are.
 *
 * <p>Design note: one memfd per (namespace, class) instead of one file per class shared by all
 * tenants: an engine maps only the descriptors of its own namespace, so it cannot read or write
 * another namespace's pages by scanning its mapping (they are not in it), and other local users
 * find nothing in {@code /dev/shm}. Global slot numbering and the one eviction policy stay as they
 * were, so the cost is address space, not memory: each memfd is sized to its whole class but
 * sparse, and pages exist only where the owner wrote. {@code memfd_create} and
 * {@code fallocate(PUNCH_HOLE)} are Linux calls; elsewhere the tier cannot open.
 */
final class DramArenas implements AutoCloseable {

    /** One namespace's arenas: a descriptor and a mapping per class, in class order. */
    record NamespaceArenas(int namespaceId, int[] fds, List<MemorySegment> segments, ArenaGeometry geometry) {
    }

    private final DramTierConfig config;
    private final long incarnation;
    private final Arena arena = Arena.ofShared();
    private final Object lock = new Object();
    /** By namespace id; at most {@code maxArenaNamespaces} entries. */
    private final ConcurrentHashMap<Integer, NamespaceArenas> byNamespace = new ConcurrentHashMap<>();
    /**
     * The entries of {@link #byNamespace} with ids below {@value #DENSE_IDS}, indexed by id: a copy
     * replaced under {@code lock} when a namespace gets arenas, read without locking. Every
     * reservation and lease looks its namespace up, and an array read costs less than boxing the id
     * and probing the map (the probes took 3.4 % of the CPU samples of a 4 KiB put+get+evict loop).
     */
    private volatile NamespaceArenas[] dense = new NamespaceArenas[0];
    /** Guarded by {@code lock}. */
    private int namespaces;
    /** Guarded by {@code lock}. */
    private boolean closed;
    private final ArenaGeometry shape;

    /** Namespace ids below this are looked up in {@link #dense} (at most 8 KiB of references). */
    static final int DENSE_IDS = 1024;

    DramArenas(DramTierConfig config, long incarnation) {
        if (!Posix.supported()) {
            throw new UnsupportedOperationException("the DRAM tier needs Linux (memfd_create) on x86_64 or aarch64");
        }
        this.config = config;
        this.incarnation = incarnation;
        List<ArenaGeometry.ClassArena> classes = new ArrayList<>();
        for (int i = 0; i < config.sizeClasses().size(); i++) {
            SizeClass c = config.sizeClasses().get(i);
            classes.add(new ArenaGeometry.ClassArena(i, -1, DramArenaLayout.fileBytes(c), c.slotBytes(), c.slotCount(),
                    DramArenaLayout.FIRST_SLOT_OFFSET));
        }
        this.shape = new ArenaGeometry(incarnation, classes);
    }

    /**
     * The arenas of {@code namespaceId}, created (and their headers written) on first use; empty
     * when {@code maxArenaNamespaces} namespaces already have arenas.
     *
     * @throws IOException if the kernel refuses a memfd (out of memory or descriptors)
     */
    Optional<NamespaceArenas> arenasFor(int namespaceId) throws IOException {
        if (namespaceId < 0) throw new IllegalArgumentException("namespaceId must be >= 0: " + namespaceId);
        NamespaceArenas known = lookup(namespaceId);
        if (known != null) return Optional.of(known);
        synchronized (lock) {
            known = byNamespace.get(namespaceId);
            if (known != null) return Optional.of(known);
            if (closed) throw new IllegalStateException("DRAM tier is closed");
            if (namespaces >= config.maxArenaNamespaces()) return Optional.empty();
            NamespaceArenas created = create(namespaceId);
            byNamespace.put(namespaceId, created);
            if (namespaceId < DENSE_IDS) {
                NamespaceArenas[] grown = java.util.Arrays.copyOf(dense, Math.max(dense.length, namespaceId + 1));
                grown[namespaceId] = created;
                dense = grown;
            }
            namespaces++;
            return Optional.of(created);
        }
    }

    /** True when {@code namespaceId} has arenas now or they could be created; creates them. */
    boolean ensure(int namespaceId) throws IOException {
        return lookup(namespaceId) != null || arenasFor(namespaceId).isPresent();
    }

    /** The arenas of {@code namespaceId} if it has them, else null; never creates. */
    private NamespaceArenas lookup(int namespaceId) {
        NamespaceArenas[] d = dense;
        if (namespaceId >= 0 && namespaceId < d.length) return d[namespaceId];
        return namespaceId < DENSE_IDS ? null : byNamespace.get(namespaceId);
    }

    /** Called under {@code lock}. */
    private NamespaceArenas create(int namespaceId) throws IOException {
        int classCount = config.sizeClasses().size();
        int[] fds = new int[classCount];
        List<MemorySegment> segments = new ArrayList<>(classCount);
        List<ArenaGeometry.ClassArena> classes = new ArrayList<>(classCount);
        int made = 0;
        try {
            for (int i = 0; i < classCount; i++) {
                SizeClass c = config.sizeClasses().get(i);
                long bytes = DramArenaLayout.fileBytes(c);
                int fd = Posix.memfd(config.arenaName() + ".ns" + namespaceId + ".c" + i, bytes);
                if (fd < 0) throw new IOException("memfd_create for namespace " + namespaceId + " failed: errno " + -fd);
                fds[i] = fd;
                made++;
                MemorySegment segment;
                try (FileChannel ch = FileChannel.open(Posix.procPath(fd), StandardOpenOption.READ,
                        StandardOpenOption.WRITE)) {
                    segment = ch.map(FileChannel.MapMode.READ_WRITE, 0, bytes, arena);
                }
                DramArenaLayout.writeHeader(segment, i, c, incarnation);
                segments.add(segment);
                classes.add(new ArenaGeometry.ClassArena(i, fd, bytes, c.slotBytes(),
                        c.slotCount(), DramArenaLayout.FIRST_SLOT_OFFSET));
            }
        } catch (IOException | RuntimeException e) {
            for (int i = 0; i < made; i++) Posix.close(fds[i]);
            throw e;
        }
        return new NamespaceArenas(namespaceId, fds, List.copyOf(segments), new ArenaGeometry(incarnation, classes));
    }

    /**
     * The whole mapping of class {@code classIndex} of {@code namespaceId} (header included); the
     * namespace's arenas must exist (its slots were reserved through them).
     */
    MemorySegment segment(int namespaceId, int classIndex) {
        return existing(namespaceId).segments().get(classIndex);
    }

    /** Frees {@code namespaceId}'s pages of {@code [offset, offset + length)} in class {@code classIndex}. */
    void punch(int namespaceId, int classIndex, long offset, long length) {
        NamespaceArenas a = byNamespace.get(namespaceId);
        if (a == null) return;
        int r = Posix.punchHole(a.fds()[classIndex], offset, length);
        if (r < 0) throw new IllegalStateException("punching slot bytes of namespace " + namespaceId + " failed: errno " + -r);
    }

    /** Memory allocated to {@code namespaceId}'s arenas, in bytes (0 when it has none). */
    long allocatedBytes(int namespaceId) {
        NamespaceArenas a = byNamespace.get(namespaceId);
        if (a == null) return 0;
        long total = 0;
        for (int fd : a.fds()) total += Math.max(0, Posix.allocatedBytes(fd));
        return total;
    }

    /** Namespaces with arenas now. */
    int namespaces() {
        synchronized (lock) {
            return namespaces;
        }
    }

    private NamespaceArenas existing(int namespaceId) {
        NamespaceArenas a = lookup(namespaceId);
        if (a == null) throw new IllegalStateException("namespace " + namespaceId + " has no arenas");
        return a;
    }

    /** The classes' layout without any namespace's descriptors (each -1). */
    ArenaGeometry geometry() {
        return shape;
    }

    /** Unmaps every arena and closes every descriptor; clients that mapped theirs keep valid (orphaned) memory. */
    @Override
    public void close() {
        synchronized (lock) {
            if (closed) return;
            closed = true;
        }
        arena.close();
        for (NamespaceArenas a : byNamespace.values()) {
            for (int fd : a.fds()) Posix.close(fd);
        }
    }
}
