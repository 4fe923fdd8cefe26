package io.orbitkv.core.fd;

import io.orbitkv.state.unix.NativeCall;
import io.orbitkv.state.unix.UnixSocket;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.invoke.MethodHandle;
import java.nio.file.Path;

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

    private static final StructLayout CAPTURE = NativeCall.CAPTURE;
    private static final String ARCH = NativeCall.ARCH;
    private static final boolean SUPPORTED = NativeCall.SUPPORTED;

    static final int O_RDWR = 2;
    static final int O_NOCTTY = 0x100;
    static final int O_NONBLOCK = 0x800;
    static final int O_CLOEXEC = 0x80000;
    /** O_NOFOLLOW differs: 0400000 on x86_64, 0100000 on aarch64. */
    static final int O_NOFOLLOW = ARCH.equals("aarch64") ? 0x8000 : 0x20000;
    /** ENOSYS, returned where this class does not know the platform. */
    public static final int ENOSYS = NativeCall.ENOSYS;

    private static final MethodHandle OPEN = SUPPORTED ? handle("open",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT), Linker.Option.firstVariadicArg(2)) : null;
    private static final MethodHandle FALLOCATE = SUPPORTED
            ? handle("fallocate", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG, JAVA_LONG)) : null;
    private static final MethodHandle FCNTL = SUPPORTED ? handle("fcntl",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT), Linker.Option.firstVariadicArg(2)) : null;
    private static final MethodHandle PRCTL = SUPPORTED ? handle("prctl",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG), Linker.Option.firstVariadicArg(1)) : null;
    static final int F_GETFL = 3;
    static final int F_DUPFD_CLOEXEC = 1030;
    static final int O_ACCMODE = 3;
    static final int PR_SET_DUMPABLE = 4;
    private static final MethodHandle FSTAT = SUPPORTED
            ? handle("fstat", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS)) : null;

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
        return NativeCall.handle(name, fd, options);
    }

    private static int errno(MemorySegment state) {
        return NativeCall.errno(state);
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
        return UnixSocket.close(fd);
    }

    /**
     * {@code memfd_create(name, MFD_CLOEXEC)} then {@code ftruncate(fd, sizeBytes)}: an anonymous,
     * sparse shared-memory file that exists only as descriptors (nothing on a file system); fd or -errno.
     */
    public static int memfd(String name, long sizeBytes) {
        return UnixSocket.memfd(name, sizeBytes);
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

    /** A new descriptor ({@code O_CLOEXEC}) of what {@code fd} holds; fd or -errno. */
    public static int duplicate(int fd) {
        return fcntl(fd, F_DUPFD_CLOEXEC, 0);
    }

    /** Whether {@code fd} was opened for reading and writing ({@code O_RDWR}). */
    public static boolean isOpenReadWrite(int fd) {
        int flags = fcntl(fd, F_GETFL, 0);
        return flags >= 0 && (flags & O_ACCMODE) == O_RDWR;
    }

    private static int fcntl(int fd, int command, int argument) {
        if (!SUPPORTED) return -ENOSYS;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = a.allocate(CAPTURE);
            int r = (int) FCNTL.invokeExact(st, fd, command, argument);
            return r < 0 ? -errno(st) : r;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * {@code prctl(PR_SET_DUMPABLE, 0)}: the process's {@code /proc/<pid>/} entries (its
     * {@code fd/} links among them) become root's, so processes of the same user can no longer
     * open its descriptors by number, nor ptrace it; no core dumps. 0 or -errno.
     */
    public static int makeUndumpable() {
        if (!SUPPORTED) return -ENOSYS;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = a.allocate(CAPTURE);
            int r = (int) PRCTL.invokeExact(st, PR_SET_DUMPABLE, 0L);
            return r < 0 ? -errno(st) : r;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** The path through which the kernel reaches the inode open as {@code fd} in this process. */
    public static Path procPath(int fd) {
        return Path.of("/proc/self/fd/" + fd);
    }

    private static RuntimeException rethrow(Throwable t) {
        return NativeCall.rethrow(t);
    }
}
