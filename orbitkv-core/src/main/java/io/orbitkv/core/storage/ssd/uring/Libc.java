package io.orbitkv.core.storage.ssd.uring;

import io.orbitkv.state.unix.NativeCall;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.invoke.MethodHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The handful of libc entry points the io_uring route needs, as {@code java.lang.foreign}
 * downcalls that capture {@code errno}: {@code syscall(2)} for io_uring_setup/io_uring_enter,
 * {@code mmap}/{@code munmap} for the rings, {@code open}/{@code close}/{@code pipe}/{@code write}
 * for file descriptors, {@code pwritev}/{@code preadv} for the SSD store's one-call extent I/O. Every call returns the raw result or {@code -errno}, the kernel's own
 * convention, so callers turn failures into values.
 *
 * <p>Thread model: stateless and thread-safe; each call captures errno into a confined arena of
 * its own (24 bytes).
 *
 * <p>Design note: raw syscalls instead of liburing keep the route dependency-free (liburing is
 * not installed on these hosts) and its whole ABI surface is five structs and two syscalls.
 * Syscall numbers 425/426 are the asm-generic numbers shared by x86_64 and aarch64; other
 * architectures report the route unavailable instead of guessing.
 */
@SuppressWarnings("restricted") // FFM downcalls are this class's job; the launchers grant --enable-native-access
public final class Libc {

    private static final StructLayout CAPTURE = NativeCall.CAPTURE;

    /** Linux on x86_64 or aarch64; elsewhere the route reports itself unavailable and no call is made. */
    private static final String ARCH = NativeCall.ARCH;
    static final boolean SUPPORTED = NativeCall.SUPPORTED;
    static final long SYS_IO_URING_SETUP = 425;
    static final long SYS_IO_URING_ENTER = 426;
    static final int O_RDONLY = 0;
    static final int O_RDWR = 2;
    static final int O_CLOEXEC = 0x80000;
    /** O_DIRECT differs: 040000 on x86_64, 0200000 on aarch64. */
    static final int O_DIRECT = ARCH.equals("aarch64") ? 0x10000 : 0x4000;
    static final int PROT_READ_WRITE = 0x1 | 0x2;
    static final int MAP_SHARED_POPULATE = 0x01 | 0x8000;
    static final int EINTR = 4;
    static final int EAGAIN = 11;
    static final int EBUSY = 16;
    /** ENOSPC: no space left on device. */
    public static final int ENOSPC = 28;
    /** One {@code struct iovec}: base address, then length (both 8 bytes on the supported 64-bit ABIs). */
    private static final long IOVEC_BYTES = 16;

    private static final MethodHandle SYSCALL2 = handle("syscall",
            FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_LONG, ADDRESS), true);
    private static final MethodHandle SYSCALL6 = handle("syscall",
            FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, ADDRESS, JAVA_LONG),
            true);
    private static final MethodHandle MMAP = handle("mmap",
            FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG), false);
    private static final MethodHandle MUNMAP = handle("munmap",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG), false);
    private static final MethodHandle OPEN = handle("open",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT), true);
    private static final MethodHandle CLOSE = handle("close", FunctionDescriptor.of(JAVA_INT, JAVA_INT), false);
    private static final MethodHandle PIPE = handle("pipe", FunctionDescriptor.of(JAVA_INT, ADDRESS), false);
    private static final MethodHandle WRITE = handle("write",
            FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG), false);

    private static final MethodHandle PWRITEV = handle("pwritev",
            FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_INT, JAVA_LONG), false);
    private static final MethodHandle PREADV = handle("preadv",
            FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_INT, JAVA_LONG), false);

    private Libc() {}

    /** True on Linux x86_64/aarch64, the platforms whose flags and syscall numbers this class knows. */
    public static boolean supported() {
        return SUPPORTED;
    }

    private static MethodHandle handle(String name, FunctionDescriptor fd, boolean variadicAfterFirst) {
        return variadicAfterFirst
                ? NativeCall.handle(name, fd, Linker.Option.firstVariadicArg(1))
                : NativeCall.handle(name, fd);
    }

    private static int errno(MemorySegment state) {
        return NativeCall.errno(state);
    }

    /** {@code io_uring_setup(entries, params)}: the ring fd or -errno. */
    static int ioUringSetup(int entries, MemorySegment params) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = a.allocate(CAPTURE);
            long r = (long) SYSCALL2.invokeExact(st, SYS_IO_URING_SETUP, (long) entries, params);
            return r < 0 ? -errno(st) : (int) r;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code io_uring_enter(fd, toSubmit, minComplete, flags, NULL, 0)}: SQEs consumed or -errno. */
    static int ioUringEnter(int ringFd, int toSubmit, int minComplete, int flags) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = a.allocate(CAPTURE);
            long r = (long) SYSCALL6.invokeExact(st, SYS_IO_URING_ENTER, (long) ringFd, (long) toSubmit,
                    (long) minComplete, (long) flags, MemorySegment.NULL, 0L);
            return r < 0 ? -errno(st) : (int) r;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Shared read/write mapping of {@code length} bytes of {@code fd} at {@code offset}; address or -errno. */
    static long mmap(long length, int fd, long offset) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = a.allocate(CAPTURE);
            MemorySegment r = (MemorySegment) MMAP.invokeExact(st, MemorySegment.NULL, length, PROT_READ_WRITE,
                    MAP_SHARED_POPULATE, fd, offset);
            return r.address() == -1L ? -errno(st) : r.address();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int munmap(long address, long length) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = a.allocate(CAPTURE);
            int r = (int) MUNMAP.invokeExact(st, MemorySegment.ofAddress(address), length);
            return r < 0 ? -errno(st) : r;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Opens {@code path} read-only (with O_DIRECT when asked); fd or -errno. */
    public static int openReadOnly(String path, boolean direct) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = a.allocate(CAPTURE);
            int flags = O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0);
            int r = (int) OPEN.invokeExact(st, a.allocateFrom(path), flags);
            return r < 0 ? -errno(st) : r;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Opens the existing file {@code path} for reading and writing (with O_DIRECT when asked); fd or -errno. */
    public static int openReadWrite(String path, boolean direct) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = a.allocate(CAPTURE);
            int flags = O_RDWR | O_CLOEXEC | (direct ? O_DIRECT : 0);
            int r = (int) OPEN.invokeExact(st, a.allocateFrom(path), flags);
            return r < 0 ? -errno(st) : r;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * {@code pwritev(fd, [first, second], 2, offset)}: one positional gathering write of
     * {@code first} then {@code second}; bytes written (possibly fewer than both) or -errno.
     */
    public static long pwritev(int fd, MemorySegment first, MemorySegment second, long offset) {
        return vectored(PWRITEV, fd, first, second, offset);
    }

    /**
     * {@code preadv(fd, [first, second], 2, offset)}: one positional scattering read into
     * {@code first} then {@code second}; bytes read (fewer at end of file) or -errno.
     */
    public static long preadv(int fd, MemorySegment first, MemorySegment second, long offset) {
        return vectored(PREADV, fd, first, second, offset);
    }

    private static long vectored(MethodHandle call, int fd, MemorySegment first, MemorySegment second, long offset) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = a.allocate(CAPTURE);
            MemorySegment iov = a.allocate(2 * IOVEC_BYTES, 8);
            iov.set(JAVA_LONG, 0, first.address());
            iov.set(JAVA_LONG, 8, first.byteSize());
            iov.set(JAVA_LONG, IOVEC_BYTES, second.address());
            iov.set(JAVA_LONG, IOVEC_BYTES + 8, second.byteSize());
            long r = (long) call.invokeExact(st, fd, iov, 2, offset);
            return r < 0 ? -errno(st) : r;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static int close(int fd) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = a.allocate(CAPTURE);
            int r = (int) CLOSE.invokeExact(st, fd);
            return r < 0 ? -errno(st) : r;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** A pipe: {@code {readFd, writeFd}}; throws when the process is out of descriptors. */
    public static int[] pipe() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = a.allocate(CAPTURE);
            MemorySegment fds = a.allocate(JAVA_INT, 2);
            int r = (int) PIPE.invokeExact(st, fds);
            if (r < 0) throw new IllegalStateException("pipe failed: errno " + errno(st));
            return new int[] {fds.getAtIndex(JAVA_INT, 0), fds.getAtIndex(JAVA_INT, 1)};
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code write(fd, buffer, length)}: bytes written or -errno. */
    public static long write(int fd, MemorySegment buffer) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = a.allocate(CAPTURE);
            long r = (long) WRITE.invokeExact(st, fd, buffer, buffer.byteSize());
            return r < 0 ? -errno(st) : r;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    private static RuntimeException rethrow(Throwable t) {
        return NativeCall.rethrow(t);
    }
}
