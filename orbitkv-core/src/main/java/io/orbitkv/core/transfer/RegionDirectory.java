package io.orbitkv.core.transfer;

import io.orbitkv.core.fd.Posix;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.nio.file.attribute.UserPrincipal;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * Decides which files REGISTER_REGION may name (protocol §5.2): only a regular file with one
 * link, inside the Manager's {@code regionDir} (after every symbolic link is resolved) and not
 * inside one of the Manager's own directories, owned by the uid of the connecting client (read by
 * the transport with {@code SO_PEERCRED}), at least {@code size_bytes} long. RESTORE writes into
 * a region, so a region the client could not write itself would let it write through the Manager.
 *
 * <p>Immutable after construction; thread-safe.
 *
 * <p>Invariants: every refusal is the one {@link #REFUSED} message (the same error code, NOT_FOUND,
 * at the caller), whatever the reason: a client learns nothing about another path's existence,
 * type, owner or size. A file is never written, truncated or created here.
 *
 * <p>Design note: the checks run on the opened descriptor, not on the path. The path is resolved
 * once ({@code toRealPath}) only to refuse early, without opening, what lies outside; then it is
 * opened with {@code O_NOFOLLOW | O_NONBLOCK} and the descriptor's own inode is examined through
 * {@code /proc/self/fd/N} (its real path, type, link count, owner, size) and mapped through that
 * same link. A client that swaps the file, a directory above it, or a symbolic link in between
 * after the first check can only make the second check fail: what is mapped is what was checked.
 * One link only, because a hard link inside the directory to a file outside it (an SSD extent
 * file on the same file system) has the outside file's owner and would otherwise pass.
 */
public final class RegionDirectory {

    /** The one answer to every refused REGISTER_REGION path. */
    public static final String REFUSED = "region refused: REGISTER_REGION needs a regular file with one link,"
            + " owned by the connecting client's uid, inside the Manager's regionDir, at least size_bytes long";

    /** The one answer to every refused REGISTER_REGION descriptor. */
    public static final String REFUSED_DESCRIPTOR = "region refused: REGISTER_REGION by descriptor needs the handle of a"
            + " read-write regular file or memfd of at least size_bytes, handed over by the connecting client's uid";

    private static final int S_IFMT = 0170000;
    private static final int S_IFREG = 0100000;

    private final Path root;
    private final List<Path> excluded;

    private RegionDirectory(Path root, List<Path> excluded) {
        this.root = root;
        this.excluded = List.copyOf(excluded);
    }

    /**
     * The existing directory {@code directory}, with the Manager's own directories {@code excluded}
     * (its DRAM and SSD directories; those that do not exist yet are resolved as written).
     *
     * @throws IOException if {@code directory} does not exist or cannot be resolved
     */
    public static RegionDirectory of(Path directory, List<Path> excluded) throws IOException {
        Path root = directory.toRealPath();
        if (!Files.isDirectory(root)) throw new IOException("regionDir " + directory + " is not a directory");
        List<Path> own = new ArrayList<>();
        for (Path p : excluded) {
            Path abs = p.toAbsolutePath().normalize();
            own.add(Files.exists(abs) ? abs.toRealPath() : abs);
        }
        return new RegionDirectory(root, own);
    }

    /** The resolved directory. */
    public Path root() {
        return root;
    }

    /**
     * Opens {@code path} for {@code client} and maps {@code sizeBytes} of it, or refuses with
     * {@link #REFUSED}. {@code client} is empty when the transport could not tell who connected:
     * then every path is refused.
     */
    public EngineRegion.Opening open(String path, long sizeBytes, int pageBytes, int pageCount,
                                     Optional<UserPrincipal> client) {
        Objects.requireNonNull(path, "path");
        if (client.isEmpty() || !Posix.supported()) return refused();
        Path real;
        try {
            Path named = Path.of(path);
            if (!named.isAbsolute()) return refused();
            real = named.toRealPath();
        } catch (InvalidPathException | IOException | SecurityException e) {
            return refused();
        }
        if (!allowed(real)) return refused();
        int fd = Posix.openExistingNoFollow(real.toString());
        if (fd < 0) return refused();
        try {
            Path opened = Posix.procPath(fd);
            Path where = opened.toRealPath();
            if (!allowed(where)) return refused();
            Map<String, Object> attributes = Files.readAttributes(opened, "unix:mode,nlink,size");
            int mode = (Integer) attributes.get("mode");
            if ((mode & S_IFMT) != S_IFREG || (Integer) attributes.get("nlink") != 1) return refused();
            if ((Long) attributes.get("size") < sizeBytes) return refused();
            if (!Files.getOwner(opened).equals(client.get())) return refused();
            return switch (EngineRegion.map(opened, where, sizeBytes, pageBytes, pageCount)) {
                case EngineRegion.Opened o -> o;
                case EngineRegion.NotFound ignored -> refused();
            };
        } catch (IOException | SecurityException | UnsupportedOperationException e) {
            return refused();
        } finally {
            Posix.close(fd);
        }
    }

    /**
     * Maps {@code sizeBytes} of the region descriptor {@code fd} a client handed over (protocol
     * §6.11), or refuses with {@link #REFUSED_DESCRIPTOR}; takes ownership of {@code fd} and closes
     * it either way. No path or owner check applies: the client holds the descriptor, so it could
     * write the memory itself; but it must be open read-write (a descriptor opened read-only must
     * not become writable through the Manager's reopening of {@code /proc/self/fd/N}) and a regular
     * file (a memfd is one), at least {@code sizeBytes} long.
     */
    public static EngineRegion.Opening openDescriptor(int fd, long sizeBytes, int pageBytes, int pageCount) {
        try {
            if (!Posix.isOpenReadWrite(fd)) return refusedDescriptor();
            Path opened = Posix.procPath(fd);
            Map<String, Object> attributes = Files.readAttributes(opened, "unix:mode,size");
            int mode = (Integer) attributes.get("mode");
            if ((mode & S_IFMT) != S_IFREG || (Long) attributes.get("size") < sizeBytes) return refusedDescriptor();
            Path shown = Path.of("descriptor:" + Files.readSymbolicLink(opened));
            return switch (EngineRegion.map(opened, shown, sizeBytes, pageBytes, pageCount)) {
                case EngineRegion.Opened o -> o;
                case EngineRegion.NotFound ignored -> refusedDescriptor();
            };
        } catch (IOException | SecurityException | UnsupportedOperationException e) {
            return refusedDescriptor();
        } finally {
            Posix.close(fd);
        }
    }

    private static EngineRegion.NotFound refusedDescriptor() {
        return new EngineRegion.NotFound(REFUSED_DESCRIPTOR);
    }

    private boolean allowed(Path real) {
        if (!real.startsWith(root) || real.equals(root)) return false;
        for (Path own : excluded) {
            if (real.startsWith(own) || own.startsWith(real)) return false;
        }
        return true;
    }

    private static EngineRegion.NotFound refused() {
        return new EngineRegion.NotFound(REFUSED);
    }

    /** Whether {@code a} and {@code b} overlap (one inside the other); for configuration checks. */
    public static boolean overlap(Path a, Path b) {
        Path x = a.toAbsolutePath().normalize();
        Path y = b.toAbsolutePath().normalize();
        return x.startsWith(y) || y.startsWith(x);
    }
}
