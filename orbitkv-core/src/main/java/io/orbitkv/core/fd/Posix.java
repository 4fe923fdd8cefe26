package io.orbitkv.core.fd;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout.PathElement;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.nio.file.Path;
import java.util.Locale;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The libc calls the Manager needs on raw file descriptors that Java's file API cannot give it:
 * {@code open} with {@code O_NOFOLLOW} (so a region file is checked through the descriptor the
 * Manager will map, not through a path a client may swap), {@code memfd_create} and
 * {@code ftruncate} (DRAM arenas that exist on no file system), {@code fallocate} punching holes
 * (a slot's old owner's pages are freed), {@code fstat}'s block count, and {@code close}. Every
 * call returns the raw result or {@code -errno}.
 *
 * <p>Thread model: stateless and thread-safe; each call captures errno into a confined arena of
 * its own.
 *
 * <p>Design note: a descriptor is inspected and mapped through {@code /proc/self/fd/N}: stat and
 * {@code open} of that magic link reach the very inode the descriptor holds (whatever was renamed
 * or replaced at the original path since), so Java's own {@code Files} and {@code FileChannel}
 * do the rest and this class stays a few downcalls. The flags are the Linux values shared by x86_64
 * and aarch64.
 */
@SuppressWarnings("restricted") // FFM downcalls are this class's job; the launchers grant --enable-native-access
public final class Posix {

    private static final Linker LINKER = Linker.nativeLinker();
    private static final StructLayout CAPTURE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CAPTURE.varHandle(PathElement.groupElement("errno"));
    private static final Linker.Option CAPTURE_ERRNO = Linker.Option.captureCallState("errno");
    private static final String ARCH = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
    private static final boolean SUPPORTED = System.getProperty("os.name", "").toLowerCase(Locale.ROOT).contains("linux")
            && (ARCH.equals("amd64") || ARCH.equals("x86_64") || ARCH.equals("aarch64"));

    static final int O_RDWR = 2;
    static final int O_NOCTTY = 0x100;
    static final int O_NONBLOCK = 0x800;
    static final int O_CLOEXEC = 0x80000;
    /** O_NOFOLLOW differs: 0400000 on x86_64, 0100000 on aarch64. */
    static final int O_NOFOLLOW = ARCH.equals("aarch64") ? 0x8000 : 0x20000;
    /** ENOSYS, returned where this class does not know the platform. */
    public static final int ENOSYS = 38;

    private static final MethodHandle OPEN = SUPPORTED ? handle("open",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT), Linker.Option.firstVariadicArg(2)) : null;
    private static final MethodHandle CLOSE = SUPPORTED ? handle("close", FunctionDescriptor.of(JAVA_INT, JAVA_INT)) : null;
    private static final MethodHandle MEMFD_CREATE = SUPPORTED
            ? handle("memfd_create", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT)) : null;
    private static final MethodHandle FTRUNCATE = SUPPORTED
            ? handle("ftruncate", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG)) : null;
    private static final MethodHandle FALLOCATE = SUPPORTED
            ? handle("fallocate", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG, JAVA_LONG)) : null;
    private static final MethodHandle FSTAT = SUPPORTED
            ? handle("fstat", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS)) : null;

    static final int MFD_CLOEXEC = 0x1;
    static final int FALLOC_FL_KEEP_SIZE = 0x1;
    static final int FALLOC_FL_PUNCH_HOLE = 0x2;
    /** {@code struct stat} is 144 bytes on x86_64 and 128 on aarch64; {@code st_blocks} is at 64 on both. */
    private static final long STAT_BYTES = 144;
    private static final long ST_BLOCKS_OFFSET = 64;

    private Posix() {
    }

    /** True on Linux x86_64/aarch64, whose flag values this class knows. */
    public static boolean supported() {
        return SUPPORTED;
    }

    private static MethodHandle handle(String name, FunctionDescriptor fd, Linker.Option... options) {
        MemorySegment symbol = LINKER.defaultLookup().find(name)
                .orElseThrow(() -> new UnsatisfiedLinkError("libc symbol " + name));
        Linker.Option[] all = new Linker.Option[options.length + 1];
        all[0] = CAPTURE_ERRNO;
        System.arraycopy(options, 0, all, 1, options.length);
        return LINKER.downcallHandle(symbol, fd, all);
    }

    private static int errno(MemorySegment state) {
        return (int) ERRNO.get(state, 0L);
    }

    /**
     * Opens the existing {@code path} read-write without following a symbolic link in its last
     * component, without blocking (a FIFO) and without becoming a controlling terminal; fd or -errno.
     */
    public static int openExistingNoFollow(String path) {
        if (!SUPPORTED) return -ENOSYS;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = a.allocate(CAPTURE);
            int r = (int) OPEN.invokeExact(st, a.allocateFrom(path),
                    O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0);
            return r < 0 ? -errno(st) : r;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Closes {@code fd}; 0 or -errno. */
    public static int close(int fd) {
        if (!SUPPORTED) return -ENOSYS;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = a.allocate(CAPTURE);
            int r = (int) CLOSE.invokeExact(st, fd);
            return r < 0 ? -errno(st) : r;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * {@code memfd_create(name, MFD_CLOEXEC)} then {@code ftruncate(fd, sizeBytes)}: an anonymous,
     * sparse shared-memory file that exists only as descriptors (nothing on a file system); fd or -errno.
     */
    public static int memfd(String name, long sizeBytes) {
        if (!SUPPORTED) return -ENOSYS;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = a.allocate(CAPTURE);
            int fd = (int) MEMFD_CREATE.invokeExact(st, a.allocateFrom(name), MFD_CLOEXEC);
            if (fd < 0) return -errno(st);
            int r = (int) FTRUNCATE.invokeExact(st, fd, sizeBytes);
            if (r < 0) {
                int e = errno(st);
                close(fd);
                return -e;
            }
            return fd;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * Frees the pages of {@code [offset, offset + length)} of {@code fd} without changing its size
     * ({@code FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE}); they read as zeros afterwards. 0 or -errno.
     */
    public static int punchHole(int fd, long offset, long length) {
        if (!SUPPORTED) return -ENOSYS;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = a.allocate(CAPTURE);
            int r = (int) FALLOCATE.invokeExact(st, fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length);
            return r < 0 ? -errno(st) : r;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Bytes of memory or disk allocated to {@code fd} ({@code st_blocks × 512}), or -errno. */
    public static long allocatedBytes(int fd) {
        if (!SUPPORTED) return -ENOSYS;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = a.allocate(CAPTURE);
            MemorySegment stat = a.allocate(STAT_BYTES, 8);
            int r = (int) FSTAT.invokeExact(st, fd, stat);
            return r < 0 ? -errno(st) : stat.get(JAVA_LONG, ST_BLOCKS_OFFSET) * 512;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** The path through which the kernel reaches the inode open as {@code fd} in this process. */
    public static Path procPath(int fd) {
        return Path.of("/proc/self/fd/" + fd);
    }

    private static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException r) return r;
        if (t instanceof Error e) throw e;
        return new IllegalStateException("native call failed", t);
    }
}
