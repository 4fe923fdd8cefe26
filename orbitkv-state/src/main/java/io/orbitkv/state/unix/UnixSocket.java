package io.orbitkv.state.unix;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.nio.charset.StandardCharsets;
import java.util.List;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * Blocking {@code AF_UNIX} stream sockets on raw descriptors, with what Java's
 * {@code SocketChannel} cannot do: passing descriptors as {@code SCM_RIGHTS} ancillary data
 * ({@code sendmsg}/{@code recvmsg}) and reading the peer's pid, uid and gid
 * ({@code SO_PEERCRED}). Also {@code memfd_create}, so a client can make region memory that is on
 * no file system. Every call returns the raw result or {@code -errno}; descriptors are
 * {@code O_CLOEXEC} (received ones too, {@code MSG_CMSG_CLOEXEC}).
 *
 * <p>Stateless and thread-safe. The calls block the calling thread (a platform thread pins its
 * carrier for the duration): callers bound each with {@link #setTimeouts} and run them off any
 * event loop.
 *
 * <p>Design note: these are the descriptor socket's primitives (protocol §6.11) and nothing more;
 * the engine channel stays on {@code SocketChannel}, whose connection-per-virtual-thread model a
 * blocking native read would defeat (it pins the carrier thread). Struct layouts are Linux LP64:
 * {@code sockaddr_un} 110 bytes, {@code msghdr} 56, {@code cmsghdr} 16 plus 4 per descriptor,
 * {@code ucred} three ints, {@code timeval} two longs.
 */
@SuppressWarnings("restricted") // FFM downcalls are this class's job; the launchers grant --enable-native-access
public final class UnixSocket {

    /** {@code SCM_MAX_FD}: the kernel refuses a message carrying more descriptors. */
    public static final int MAX_DESCRIPTORS_PER_MESSAGE = 253;
    /** Bytes of {@code sun_path}, its terminating zero included. */
    public static final int SUN_PATH_BYTES = 108;

    static final int AF_UNIX = 1;
    static final int SOCK_STREAM = 1;
    static final int SOCK_CLOEXEC = 0x80000;
    static final int SOL_SOCKET = 1;
    static final int SO_PEERCRED = 17;
    static final int SO_RCVTIMEO = 20;
    static final int SO_SNDTIMEO = 21;
    static final int SCM_RIGHTS = 1;
    static final int MSG_CTRUNC = 0x8;
    static final int MSG_NOSIGNAL = 0x4000;
    static final int MSG_CMSG_CLOEXEC = 0x40000000;
    static final int SHUT_RDWR = 2;
    static final int MFD_CLOEXEC = 0x1;
    /** EMSGSIZE: returned when a message carried more descriptors than asked for (they are closed). */
    public static final int EMSGSIZE = 90;
    /** EAGAIN: a timeout set by {@link #setTimeouts} passed. */
    public static final int EAGAIN = 11;
    /** EINTR. */
    public static final int EINTR = 4;

    private static final long SOCKADDR_UN_BYTES = 2 + SUN_PATH_BYTES;
    private static final long MSGHDR_BYTES = 56;
    private static final long CMSG_HEADER_BYTES = 16;

    private static final MethodHandle SOCKET = NativeCall.handle("socket",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT));
    private static final MethodHandle BIND = NativeCall.handle("bind",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle LISTEN = NativeCall.handle("listen",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT));
    private static final MethodHandle ACCEPT4 = NativeCall.handle("accept4",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, ADDRESS, JAVA_INT));
    private static final MethodHandle CONNECT = NativeCall.handle("connect",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle SETSOCKOPT = NativeCall.handle("setsockopt",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle GETSOCKOPT = NativeCall.handle("getsockopt",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS, ADDRESS));
    private static final MethodHandle SENDMSG = NativeCall.handle("sendmsg",
            FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle RECVMSG = NativeCall.handle("recvmsg",
            FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle SHUTDOWN = NativeCall.handle("shutdown",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT));
    private static final MethodHandle CLOSE = NativeCall.handle("close", FunctionDescriptor.of(JAVA_INT, JAVA_INT));
    private static final MethodHandle MEMFD_CREATE = NativeCall.handle("memfd_create",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle FTRUNCATE = NativeCall.handle("ftruncate",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG));

    /** The kernel's record of who connected: pid, uid and gid at {@code connect} time. */
    public record PeerCredentials(int pid, int uid, int gid) {
    }

    private UnixSocket() {
    }

    /** True where these calls work (Linux x86_64/aarch64). */
    public static boolean supported() {
        return NativeCall.SUPPORTED;
    }

    /** A new {@code AF_UNIX} stream socket; fd or -errno. */
    public static int open() {
        if (!NativeCall.SUPPORTED) return -NativeCall.ENOSYS;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = a.allocate(NativeCall.CAPTURE);
            int r = (int) SOCKET.invokeExact(st, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
            return r < 0 ? -NativeCall.errno(st) : r;
        } catch (Throwable t) {
            throw NativeCall.rethrow(t);
        }
    }

    /** Binds {@code fd} to the file {@code path} (which must not exist); 0 or -errno. */
    public static int bind(int fd, String path) {
        return withAddress(BIND, fd, path);
    }

    /** Connects {@code fd} to the socket file {@code path}; 0 or -errno. */
    public static int connect(int fd, String path) {
        return withAddress(CONNECT, fd, path);
    }

    private static int withAddress(MethodHandle call, int fd, String path) {
        if (!NativeCall.SUPPORTED) return -NativeCall.ENOSYS;
        byte[] bytes = path.getBytes(StandardCharsets.UTF_8);
        if (bytes.length == 0 || bytes.length >= SUN_PATH_BYTES) {
            throw new IllegalArgumentException("a socket path is 1.." + (SUN_PATH_BYTES - 1) + " bytes: " + path);
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = a.allocate(NativeCall.CAPTURE);
            MemorySegment address = a.allocate(SOCKADDR_UN_BYTES, 2);
            address.set(JAVA_SHORT, 0, (short) AF_UNIX);
            MemorySegment.copy(bytes, 0, address, JAVA_BYTE, 2, bytes.length);
            int r = (int) call.invokeExact(st, fd, address, (int) SOCKADDR_UN_BYTES);
            return r < 0 ? -NativeCall.errno(st) : r;
        } catch (Throwable t) {
            throw NativeCall.rethrow(t);
        }
    }

    /** {@code listen(fd, backlog)}; 0 or -errno. */
    public static int listen(int fd, int backlog) {
        if (!NativeCall.SUPPORTED) return -NativeCall.ENOSYS;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = a.allocate(NativeCall.CAPTURE);
            int r = (int) LISTEN.invokeExact(st, fd, backlog);
            return r < 0 ? -NativeCall.errno(st) : r;
        } catch (Throwable t) {
            throw NativeCall.rethrow(t);
        }
    }

    /** Waits for a connection on the listening {@code fd}; the new fd or -errno ({@link #shutdown} wakes it). */
    public static int accept(int fd) {
        if (!NativeCall.SUPPORTED) return -NativeCall.ENOSYS;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = a.allocate(NativeCall.CAPTURE);
            int r = (int) ACCEPT4.invokeExact(st, fd, MemorySegment.NULL, MemorySegment.NULL, SOCK_CLOEXEC);
            return r < 0 ? -NativeCall.errno(st) : r;
        } catch (Throwable t) {
            throw NativeCall.rethrow(t);
        }
    }

    /**
     * Bounds every later receive and send on {@code fd} to {@code millis} each
     * ({@code SO_RCVTIMEO}, {@code SO_SNDTIMEO}): past it the call fails with {@link #EAGAIN}. 0 or -errno.
     */
    public static int setTimeouts(int fd, long millis) {
        if (!NativeCall.SUPPORTED) return -NativeCall.ENOSYS;
        if (millis <= 0) throw new IllegalArgumentException("timeout must be positive: " + millis);
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = a.allocate(NativeCall.CAPTURE);
            MemorySegment timeval = a.allocate(16, 8);
            timeval.set(JAVA_LONG, 0, millis / 1000);
            timeval.set(JAVA_LONG, 8, (millis % 1000) * 1000);
            for (int option : new int[] {SO_RCVTIMEO, SO_SNDTIMEO}) {
                int r = (int) SETSOCKOPT.invokeExact(st, fd, SOL_SOCKET, option, timeval, 16);
                if (r < 0) return -NativeCall.errno(st);
            }
            return 0;
        } catch (Throwable t) {
            throw NativeCall.rethrow(t);
        }
    }

    /**
     * The connected peer's credentials ({@code SO_PEERCRED}) into {@code out}: {@code out[0]} pid,
     * {@code out[1]} uid, {@code out[2]} gid. 0 or -errno.
     */
    public static int peerCredentials(int fd, int[] out) {
        if (!NativeCall.SUPPORTED) return -NativeCall.ENOSYS;
        if (out.length != 3) throw new IllegalArgumentException("out holds pid, uid, gid");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = a.allocate(NativeCall.CAPTURE);
            MemorySegment ucred = a.allocate(12, 4);
            MemorySegment length = a.allocate(JAVA_INT);
            length.set(JAVA_INT, 0, 12);
            int r = (int) GETSOCKOPT.invokeExact(st, fd, SOL_SOCKET, SO_PEERCRED, ucred, length);
            if (r < 0) return -NativeCall.errno(st);
            for (int i = 0; i < 3; i++) out[i] = ucred.getAtIndex(JAVA_INT, i);
            return 0;
        } catch (Throwable t) {
            throw NativeCall.rethrow(t);
        }
    }

    /** {@link #peerCredentials(int, int[])} as a record; throws {@link IllegalStateException} with the errno. */
    public static PeerCredentials peer(int fd) {
        int[] out = new int[3];
        int r = peerCredentials(fd, out);
        if (r < 0) throw new IllegalStateException("SO_PEERCRED failed: errno " + -r);
        return new PeerCredentials(out[0], out[1], out[2]);
    }

    /**
     * One {@code sendmsg} of {@code data} with {@code fds} as {@code SCM_RIGHTS} (none when empty),
     * without SIGPIPE; bytes sent (the descriptors travel with the first byte) or -errno.
     */
    public static long send(int fd, byte[] data, int[] fds) {
        if (!NativeCall.SUPPORTED) return -NativeCall.ENOSYS;
        if (data.length == 0) throw new IllegalArgumentException("descriptors travel with at least one byte");
        if (fds.length > MAX_DESCRIPTORS_PER_MESSAGE) {
            throw new IllegalArgumentException(fds.length + " descriptors exceed " + MAX_DESCRIPTORS_PER_MESSAGE);
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = a.allocate(NativeCall.CAPTURE);
            MemorySegment buffer = a.allocateFrom(JAVA_BYTE, data);
            MemorySegment iov = a.allocate(16, 8);
            iov.set(JAVA_LONG, 0, buffer.address());
            iov.set(JAVA_LONG, 8, data.length);
            MemorySegment msg = a.allocate(MSGHDR_BYTES, 8);
            msg.set(ADDRESS, 16, iov);
            msg.set(JAVA_LONG, 24, 1L);
            if (fds.length > 0) {
                long space = controlSpace(fds.length);
                MemorySegment control = a.allocate(space, 8);
                control.set(JAVA_LONG, 0, CMSG_HEADER_BYTES + 4L * fds.length);
                control.set(JAVA_INT, 8, SOL_SOCKET);
                control.set(JAVA_INT, 12, SCM_RIGHTS);
                for (int i = 0; i < fds.length; i++) control.set(JAVA_INT, CMSG_HEADER_BYTES + 4L * i, fds[i]);
                msg.set(ADDRESS, 32, control);
                msg.set(JAVA_LONG, 40, space);
            }
            long r = (long) SENDMSG.invokeExact(st, fd, msg, MSG_NOSIGNAL);
            return r < 0 ? -NativeCall.errno(st) : r;
        } catch (Throwable t) {
            throw NativeCall.rethrow(t);
        }
    }

    /**
     * One {@code recvmsg} of up to {@code length} bytes into {@code into[offset..]}, accepting up to
     * {@code maxFds} descriptors, which are appended to {@code fds} (the caller owns them). Bytes
     * received (0 at end of stream) or -errno; when the message carried more descriptors than
     * {@code maxFds} (the kernel truncated them) every descriptor received is closed and the result
     * is {@code -EMSGSIZE}.
     */
    public static long receive(int fd, byte[] into, int offset, int length, int maxFds, List<Integer> fds) {
        if (!NativeCall.SUPPORTED) return -NativeCall.ENOSYS;
        if (maxFds < 0 || maxFds > MAX_DESCRIPTORS_PER_MESSAGE) throw new IllegalArgumentException("maxFds " + maxFds);
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = a.allocate(NativeCall.CAPTURE);
            MemorySegment buffer = a.allocate(Math.max(1, length));
            MemorySegment iov = a.allocate(16, 8);
            iov.set(JAVA_LONG, 0, buffer.address());
            iov.set(JAVA_LONG, 8, length);
            MemorySegment msg = a.allocate(MSGHDR_BYTES, 8);
            msg.set(ADDRESS, 16, iov);
            msg.set(JAVA_LONG, 24, 1L);
            // Room for one descriptor more than asked, so an over-full message is seen, not silently cut.
            long space = controlSpace(maxFds + 1);
            MemorySegment control = a.allocate(space, 8);
            msg.set(ADDRESS, 32, control);
            msg.set(JAVA_LONG, 40, space);
            long r = (long) RECVMSG.invokeExact(st, fd, msg, MSG_CMSG_CLOEXEC);
            if (r < 0) return -NativeCall.errno(st);
            int before = fds.size();
            long controlLength = msg.get(JAVA_LONG, 40);
            long at = 0;
            while (at + CMSG_HEADER_BYTES <= controlLength) {
                long cmsgLength = control.get(JAVA_LONG, at);
                if (cmsgLength < CMSG_HEADER_BYTES || at + cmsgLength > controlLength) break;
                if (control.get(JAVA_INT, at + 8) == SOL_SOCKET && control.get(JAVA_INT, at + 12) == SCM_RIGHTS) {
                    long n = (cmsgLength - CMSG_HEADER_BYTES) / 4;
                    for (long i = 0; i < n; i++) fds.add(control.get(JAVA_INT, at + CMSG_HEADER_BYTES + 4 * i));
                }
                at += (cmsgLength + 7) & ~7L;
            }
            boolean truncated = (msg.get(JAVA_INT, 48) & MSG_CTRUNC) != 0;
            if (truncated || fds.size() - before > maxFds) {
                while (fds.size() > before) close(fds.removeLast());
                return -EMSGSIZE;
            }
            MemorySegment.copy(buffer, JAVA_BYTE, 0, into, offset, (int) r);
            return r;
        } catch (Throwable t) {
            throw NativeCall.rethrow(t);
        }
    }

    private static long controlSpace(int fds) {
        return CMSG_HEADER_BYTES + ((4L * fds + 7) & ~7L);
    }

    /** {@code shutdown(fd, SHUT_RDWR)}: wakes a thread blocked in {@link #accept} or a receive on it. 0 or -errno. */
    public static int shutdown(int fd) {
        if (!NativeCall.SUPPORTED) return -NativeCall.ENOSYS;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = a.allocate(NativeCall.CAPTURE);
            int r = (int) SHUTDOWN.invokeExact(st, fd, SHUT_RDWR);
            return r < 0 ? -NativeCall.errno(st) : r;
        } catch (Throwable t) {
            throw NativeCall.rethrow(t);
        }
    }

    /** Closes {@code fd}; 0 or -errno. */
    public static int close(int fd) {
        if (!NativeCall.SUPPORTED) return -NativeCall.ENOSYS;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = a.allocate(NativeCall.CAPTURE);
            int r = (int) CLOSE.invokeExact(st, fd);
            return r < 0 ? -NativeCall.errno(st) : r;
        } catch (Throwable t) {
            throw NativeCall.rethrow(t);
        }
    }

    /**
     * {@code memfd_create(name, MFD_CLOEXEC)} then {@code ftruncate(fd, sizeBytes)}: anonymous,
     * sparse shared memory that exists only as descriptors (nothing on a file system); fd or -errno.
     */
    public static int memfd(String name, long sizeBytes) {
        if (!NativeCall.SUPPORTED) return -NativeCall.ENOSYS;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = a.allocate(NativeCall.CAPTURE);
            int fd = (int) MEMFD_CREATE.invokeExact(st, a.allocateFrom(name), MFD_CLOEXEC);
            if (fd < 0) return -NativeCall.errno(st);
            int r = (int) FTRUNCATE.invokeExact(st, fd, sizeBytes);
            if (r < 0) {
                int e = NativeCall.errno(st);
                close(fd);
                return -e;
            }
            return fd;
        } catch (Throwable t) {
            throw NativeCall.rethrow(t);
        }
    }
}
