package io.orbitkv.core.storage.ssd.uring;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;

import static io.orbitkv.core.storage.ssd.uring.UringLayout.CQRING_OFFSETS;
import static io.orbitkv.core.storage.ssd.uring.UringLayout.SQRING_OFFSETS;
import static io.orbitkv.core.storage.ssd.uring.UringLayout.field;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * One io_uring instance: the ring file descriptor and its three shared mappings (SQ ring, CQ
 * ring, SQE array), with the minimum of operations over them: queue a read or a no-op, submit,
 * wait, and drain completions.
 *
 * <p>Thread model: the submission side ({@link #queueRead}, {@link #queueNop}, {@link #submit})
 * must be called by one thread at a time (the caller serialises it); the completion side
 * ({@link #drain}, {@link #submitAndWait}) by one thread at a time (the completion owner).
 * The two sides touch disjoint ring fields, as the kernel ABI intends. {@link #close} only after
 * both sides have stopped.
 *
 * <p>Invariants: the application's SQ tail is at most {@code sqEntries} ahead of the kernel's
 * SQ head; each CQE is handed back (CQ head advanced) only after it has been read.
 *
 * <p>Design note: no SQPOLL. A polling kernel thread would burn a core of the two these hosts
 * have; one {@code io_uring_enter} per submitted read (two SQEs) costs ~1 µs, under 1 % of a
 * 256 KiB O_DIRECT read (~100 µs).
 */
@SuppressWarnings("restricted") // FFM downcalls are this class's job; the launchers grant --enable-native-access
public final class IoUring implements AutoCloseable {

    private static final VarHandle U32 = UringLayout.RING_U32.varHandle();

    private final int ringFd;
    private final int sqEntries;
    private final int cqEntries;
    private final long sqRingBytes;
    private final long cqRingBytes;
    private final long sqeBytes;
    private final MemorySegment sqRing;
    private final MemorySegment cqRing;
    private final MemorySegment sqes;
    private final long sqHeadOff, sqTailOff, sqMask, sqArrayOff;
    private final long cqHeadOff, cqTailOff, cqMask, cqesOff;
    private int sqTailLocal;
    private int pendingSubmit;

    /** Result of {@link #setup}. */
    public sealed interface Setup {
        record Ready(IoUring ring) implements Setup {}

        record Failed(String reason) implements Setup {}
    }

    private IoUring(int ringFd, MemorySegment params, long sqAddr, long sqRingBytes, long cqAddr, long cqRingBytes,
                    long sqeAddr, long sqeBytes) {
        this.ringFd = ringFd;
        this.sqEntries = params.get(JAVA_INT, UringLayout.PARAMS_SQ_ENTRIES);
        this.cqEntries = params.get(JAVA_INT, UringLayout.PARAMS_CQ_ENTRIES);
        this.sqRingBytes = sqRingBytes;
        this.cqRingBytes = cqRingBytes;
        this.sqeBytes = sqeBytes;
        this.sqRing = MemorySegment.ofAddress(sqAddr).reinterpret(sqRingBytes);
        this.cqRing = MemorySegment.ofAddress(cqAddr).reinterpret(cqRingBytes);
        this.sqes = MemorySegment.ofAddress(sqeAddr).reinterpret(sqeBytes);
        MemorySegment sqOff = params.asSlice(UringLayout.PARAMS_SQ_OFF, SQRING_OFFSETS);
        MemorySegment cqOff = params.asSlice(UringLayout.PARAMS_CQ_OFF, CQRING_OFFSETS);
        this.sqHeadOff = u32(sqOff, field(SQRING_OFFSETS, "head"));
        this.sqTailOff = u32(sqOff, field(SQRING_OFFSETS, "tail"));
        this.sqMask = sqRing.get(JAVA_INT, u32(sqOff, field(SQRING_OFFSETS, "ring_mask")));
        this.sqArrayOff = u32(sqOff, field(SQRING_OFFSETS, "array"));
        this.cqHeadOff = u32(cqOff, field(CQRING_OFFSETS, "head"));
        this.cqTailOff = u32(cqOff, field(CQRING_OFFSETS, "tail"));
        this.cqMask = cqRing.get(JAVA_INT, u32(cqOff, field(CQRING_OFFSETS, "ring_mask")));
        this.cqesOff = u32(cqOff, field(CQRING_OFFSETS, "cqes"));
        this.sqTailLocal = (int) U32.getAcquire(sqRing, sqTailOff);
    }

    private static long u32(MemorySegment s, long off) {
        return Integer.toUnsignedLong(s.get(JAVA_INT, off));
    }

    /**
     * Creates a ring of at least {@code entries} SQEs (the kernel rounds up to a power of two)
     * and maps it. Every failure, from an unsupported architecture to a seccomp refusal, is a
     * {@link Setup.Failed} with the reason, never an exception.
     */
    public static Setup setup(int entries) {
        if (!Libc.SUPPORTED) return new Setup.Failed("io_uring route supports Linux x86_64/aarch64 only");
        int fd;
        MemorySegment params;
        try {
            params = Arena.ofAuto().allocate(UringLayout.PARAMS);
            fd = Libc.ioUringSetup(entries, params);
        } catch (LinkageError | RuntimeException e) {
            return new Setup.Failed("io_uring_setup unreachable: " + e);
        }
        if (fd < 0) return new Setup.Failed("io_uring_setup failed: errno " + (-fd));
        int features = params.get(JAVA_INT, UringLayout.PARAMS_FEATURES);
        if ((features & UringLayout.FEAT_NODROP) == 0) {
            Libc.close(fd);
            return new Setup.Failed("kernel lacks IORING_FEAT_NODROP (Linux < 5.5)");
        }
        int sqN = params.get(JAVA_INT, UringLayout.PARAMS_SQ_ENTRIES);
        int cqN = params.get(JAVA_INT, UringLayout.PARAMS_CQ_ENTRIES);
        MemorySegment sqOff = params.asSlice(UringLayout.PARAMS_SQ_OFF, SQRING_OFFSETS);
        MemorySegment cqOff = params.asSlice(UringLayout.PARAMS_CQ_OFF, CQRING_OFFSETS);
        long sqBytes = u32(sqOff, field(SQRING_OFFSETS, "array")) + 4L * sqN;
        long cqBytes = u32(cqOff, field(CQRING_OFFSETS, "cqes")) + UringLayout.CQE.byteSize() * cqN;
        long sqeBytes = UringLayout.SQE.byteSize() * sqN;
        long sq = Libc.mmap(sqBytes, fd, UringLayout.OFF_SQ_RING);
        long cq = sq < 0 ? -1 : Libc.mmap(cqBytes, fd, UringLayout.OFF_CQ_RING);
        long se = cq < 0 ? -1 : Libc.mmap(sqeBytes, fd, UringLayout.OFF_SQES);
        if (sq < 0 || cq < 0 || se < 0) {
            if (sq >= 0) Libc.munmap(sq, sqBytes);
            if (cq >= 0) Libc.munmap(cq, cqBytes);
            Libc.close(fd);
            return new Setup.Failed("mmap of the io_uring rings failed");
        }
        return new Setup.Ready(new IoUring(fd, params, sq, sqBytes, cq, cqBytes, se, sqeBytes));
    }

    public int sqEntries() {
        return sqEntries;
    }

    public int cqEntries() {
        return cqEntries;
    }

    /** Free SQ slots from the submitter's point of view. */
    int sqSpace() {
        int head = (int) U32.getAcquire(sqRing, sqHeadOff);
        return sqEntries - (sqTailLocal - head);
    }

    /** Queues {@code IORING_OP_READ} of {@code buffer} from {@code fd} at {@code offset}; false when the SQ is full. */
    boolean queueRead(int fd, long offset, MemorySegment buffer, long userData) {
        MemorySegment sqe = nextSqe();
        if (sqe == null) return false;
        sqe.set(JAVA_BYTE, UringLayout.SQE_OPCODE, UringLayout.OP_READ);
        sqe.set(JAVA_INT, UringLayout.SQE_FD, fd);
        sqe.set(JAVA_LONG, UringLayout.SQE_OFF, offset);
        sqe.set(JAVA_LONG, UringLayout.SQE_ADDR, buffer.address());
        sqe.set(JAVA_INT, UringLayout.SQE_LEN, Math.toIntExact(buffer.byteSize()));
        sqe.set(JAVA_LONG, UringLayout.SQE_USER_DATA, userData);
        publish();
        return true;
    }

    /**
     * Queues {@code IORING_OP_READV} from {@code fd} at {@code offset} into the {@code count}
     * buffers described by the iovec array {@code iovecs}; false when the SQ is full.
     */
    boolean queueReadv(int fd, long offset, MemorySegment iovecs, int count, long userData) {
        MemorySegment sqe = nextSqe();
        if (sqe == null) return false;
        sqe.set(JAVA_BYTE, UringLayout.SQE_OPCODE, UringLayout.OP_READV);
        sqe.set(JAVA_INT, UringLayout.SQE_FD, fd);
        sqe.set(JAVA_LONG, UringLayout.SQE_OFF, offset);
        sqe.set(JAVA_LONG, UringLayout.SQE_ADDR, iovecs.address());
        sqe.set(JAVA_INT, UringLayout.SQE_LEN, count);
        sqe.set(JAVA_LONG, UringLayout.SQE_USER_DATA, userData);
        publish();
        return true;
    }

    /** Queues a no-op completing with {@code userData} (used to wake the completion owner). */
    boolean queueNop(long userData) {
        MemorySegment sqe = nextSqe();
        if (sqe == null) return false;
        sqe.set(JAVA_BYTE, UringLayout.SQE_OPCODE, UringLayout.OP_NOP);
        sqe.set(JAVA_INT, UringLayout.SQE_FD, -1);
        sqe.set(JAVA_LONG, UringLayout.SQE_USER_DATA, userData);
        publish();
        return true;
    }

    private MemorySegment nextSqe() {
        if (sqSpace() <= 0) return null;
        int index = (int) (sqTailLocal & sqMask);
        MemorySegment sqe = sqes.asSlice(index * UringLayout.SQE.byteSize(), UringLayout.SQE.byteSize());
        sqe.fill((byte) 0);
        sqRing.setAtIndex(JAVA_INT, sqArrayOff / 4 + index, index);
        return sqe;
    }

    private void publish() {
        sqTailLocal++;
        pendingSubmit++;
        U32.setRelease(sqRing, sqTailOff, sqTailLocal);
    }

    /**
     * Hands every queued SQE to the kernel; returns 0 or -errno. On a transient refusal
     * (EINTR, EAGAIN, EBUSY) it retries; the SQEs stay queued until consumed.
     */
    int submit() {
        while (pendingSubmit > 0) {
            int r = Libc.ioUringEnter(ringFd, pendingSubmit, 0, 0);
            if (r >= 0) {
                pendingSubmit -= r;
                if (r == 0) Thread.onSpinWait();
            } else if (r != -Libc.EINTR && r != -Libc.EAGAIN && r != -Libc.EBUSY) {
                return r;
            }
        }
        return 0;
    }

    /**
     * Takes over the count of published, not yet submitted SQEs (submission side, under the
     * caller's lock), so the completion owner can submit them together with its wait. SQEs are
     * interchangeable to the kernel: whoever calls {@code io_uring_enter} with a count submits
     * that many from the SQ head, so moving the count never loses or doubles an entry.
     */
    int takePending() {
        int n = pendingSubmit;
        pendingSubmit = 0;
        return n;
    }

    /** Gives back {@code n} SQEs that {@link #submitAndWait} did not submit (submission side, under the lock). */
    void returnPending(int n) {
        pendingSubmit += n;
    }

    /**
     * Submits {@code toSubmit} SQEs taken with {@link #takePending} and blocks until at least one
     * CQE is available, in one {@code io_uring_enter}. Returns the SQEs submitted, or -errno
     * (EINTR is a normal wake-up; then nothing was submitted).
     */
    int submitAndWait(int toSubmit) {
        return Libc.ioUringEnter(ringFd, toSubmit, 1, UringLayout.ENTER_GETEVENTS);
    }

    /** Submits {@code toSubmit} SQEs taken with {@link #takePending} without waiting; count submitted or -errno. */
    int submitOnly(int toSubmit) {
        return Libc.ioUringEnter(ringFd, toSubmit, 0, 0);
    }

    /** Whether a CQE is waiting (completion side). */
    boolean hasCompletions() {
        return (int) U32.getAcquire(cqRing, cqHeadOff) != (int) U32.getAcquire(cqRing, cqTailOff);
    }

    /** Calls {@code sink} for each available CQE, then hands their slots back; returns how many. */
    int drain(CompletionSink sink) {
        int head = (int) U32.getAcquire(cqRing, cqHeadOff);
        int tail = (int) U32.getAcquire(cqRing, cqTailOff);
        int n = 0;
        while (head != tail) {
            long off = cqesOff + (head & cqMask) * UringLayout.CQE.byteSize();
            long userData = cqRing.get(JAVA_LONG, off + UringLayout.CQE_USER_DATA);
            int res = cqRing.get(JAVA_INT, off + UringLayout.CQE_RES);
            head++;
            n++;
            U32.setRelease(cqRing, cqHeadOff, head);
            sink.onCompletion(userData, res);
        }
        return n;
    }

    /** Receives one CQE on the completion owner's thread. */
    @FunctionalInterface
    interface CompletionSink {
        void onCompletion(long userData, int result);
    }

    /** Unmaps the rings and closes the ring fd; the kernel cancels what is still in flight. */
    @Override
    public void close() {
        Libc.munmap(sqes.address(), sqeBytes);
        Libc.munmap(cqRing.address(), cqRingBytes);
        Libc.munmap(sqRing.address(), sqRingBytes);
        Libc.close(ringFd);
    }
}
