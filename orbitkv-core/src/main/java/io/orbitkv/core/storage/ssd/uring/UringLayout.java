package io.orbitkv.core.storage.ssd.uring;

import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemoryLayout.PathElement;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * The kernel's io_uring ABI, transcribed from {@code /usr/include/linux/io_uring.h} (Linux 6.x
 * uapi): the structs this package reads and writes, as {@link MemoryLayout}s, and the few
 * constants it uses. Owns nothing; pure description.
 *
 * <pre>
 * io_uring_params (120 B)                    io_uring_sqe (64 B)
 *   0 sq_entries   4 cq_entries                0 opcode u8   1 flags u8   2 ioprio u16   4 fd s32
 *   8 flags       12 sq_thread_cpu             8 off u64   (union addr2, cmd_op)
 *  16 sq_thread_idle 20 features              16 addr u64  (union splice_off_in)
 *  24 wq_fd       28 resv[3]                  24 len u32   28 rw_flags u32 (union of op flags)
 *  40 sq_off  io_sqring_offsets (40 B)        32 user_data u64
 *  80 cq_off  io_cqring_offsets (40 B)        40 buf_index u16  42 personality u16  44 splice_fd_in s32
 *                                             48 addr3 u64   56 __pad2 u64
 * io_sqring_offsets: head tail ring_mask ring_entries flags dropped array resv1 (u32) resv2 (u64)
 * io_cqring_offsets: head tail ring_mask ring_entries overflow cqes flags resv1 (u32) resv2 (u64)
 * io_uring_cqe (16 B): 0 user_data u64   8 res s32   12 flags u32
 * iovec (16 B, linux/uio.h): 0 iov_base ptr   8 iov_len size_t
 * </pre>
 *
 * <p>Publication rules (from the header and io_uring(7)): the application fills an SQE and its
 * slot in the SQ index array, then stores the SQ tail with release semantics; the kernel
 * consumes entries up to that tail. The kernel stores the CQ tail with release semantics after
 * writing a CQE; the application loads it with acquire semantics, reads the CQEs and then
 * stores the CQ head with release semantics to hand the slots back.
 *
 * <p>Design note: the unions are flattened to the member this package uses ({@code off},
 * {@code addr}, {@code rw_flags}, {@code buf_index}, {@code splice_fd_in}, {@code addr3});
 * every union member has the same size and offset as the one chosen, so the struct sizes
 * (checked by a test against the header's 64/16/120/40 bytes) are exact.
 */
public final class UringLayout {

    /** Offsets of the SQ ring fields inside its mapping. */
    public static final StructLayout SQRING_OFFSETS = MemoryLayout.structLayout(
            JAVA_INT.withName("head"), JAVA_INT.withName("tail"), JAVA_INT.withName("ring_mask"),
            JAVA_INT.withName("ring_entries"), JAVA_INT.withName("flags"), JAVA_INT.withName("dropped"),
            JAVA_INT.withName("array"), JAVA_INT.withName("resv1"), JAVA_LONG.withName("resv2"))
            .withName("io_sqring_offsets");

    /** Offsets of the CQ ring fields inside its mapping. */
    public static final StructLayout CQRING_OFFSETS = MemoryLayout.structLayout(
            JAVA_INT.withName("head"), JAVA_INT.withName("tail"), JAVA_INT.withName("ring_mask"),
            JAVA_INT.withName("ring_entries"), JAVA_INT.withName("overflow"), JAVA_INT.withName("cqes"),
            JAVA_INT.withName("flags"), JAVA_INT.withName("resv1"), JAVA_LONG.withName("resv2"))
            .withName("io_cqring_offsets");

    /** Argument and result of {@code io_uring_setup(2)}. */
    public static final StructLayout PARAMS = MemoryLayout.structLayout(
            JAVA_INT.withName("sq_entries"), JAVA_INT.withName("cq_entries"), JAVA_INT.withName("flags"),
            JAVA_INT.withName("sq_thread_cpu"), JAVA_INT.withName("sq_thread_idle"), JAVA_INT.withName("features"),
            JAVA_INT.withName("wq_fd"), MemoryLayout.sequenceLayout(3, JAVA_INT).withName("resv"),
            SQRING_OFFSETS.withName("sq_off"), CQRING_OFFSETS.withName("cq_off"))
            .withName("io_uring_params");

    /** One submission queue entry. */
    public static final StructLayout SQE = MemoryLayout.structLayout(
            JAVA_BYTE.withName("opcode"), JAVA_BYTE.withName("flags"), JAVA_SHORT.withName("ioprio"),
            JAVA_INT.withName("fd"), JAVA_LONG.withName("off"), JAVA_LONG.withName("addr"),
            JAVA_INT.withName("len"), JAVA_INT.withName("rw_flags"), JAVA_LONG.withName("user_data"),
            JAVA_SHORT.withName("buf_index"), JAVA_SHORT.withName("personality"), JAVA_INT.withName("splice_fd_in"),
            JAVA_LONG.withName("addr3"), JAVA_LONG.withName("__pad2"))
            .withName("io_uring_sqe");

    /** One completion queue entry (no IORING_SETUP_CQE32). */
    public static final StructLayout CQE = MemoryLayout.structLayout(
            JAVA_LONG.withName("user_data"), JAVA_INT.withName("res"), JAVA_INT.withName("flags"))
            .withName("io_uring_cqe");

    /** {@code struct iovec} from {@code /usr/include/linux/uio.h}: base pointer and length (16 B on LP64). */
    public static final StructLayout IOVEC = MemoryLayout.structLayout(
            JAVA_LONG.withName("iov_base"), JAVA_LONG.withName("iov_len")).withName("iovec");

    public static final long PARAMS_SQ_ENTRIES = PARAMS.byteOffset(PathElement.groupElement("sq_entries"));
    public static final long PARAMS_CQ_ENTRIES = PARAMS.byteOffset(PathElement.groupElement("cq_entries"));
    public static final long PARAMS_FEATURES = PARAMS.byteOffset(PathElement.groupElement("features"));
    public static final long PARAMS_SQ_OFF = PARAMS.byteOffset(PathElement.groupElement("sq_off"));
    public static final long PARAMS_CQ_OFF = PARAMS.byteOffset(PathElement.groupElement("cq_off"));

    public static final long SQE_OPCODE = SQE.byteOffset(PathElement.groupElement("opcode"));
    public static final long SQE_FLAGS = SQE.byteOffset(PathElement.groupElement("flags"));
    public static final long SQE_FD = SQE.byteOffset(PathElement.groupElement("fd"));
    public static final long SQE_OFF = SQE.byteOffset(PathElement.groupElement("off"));
    public static final long SQE_ADDR = SQE.byteOffset(PathElement.groupElement("addr"));
    public static final long SQE_LEN = SQE.byteOffset(PathElement.groupElement("len"));
    public static final long SQE_USER_DATA = SQE.byteOffset(PathElement.groupElement("user_data"));

    public static final long CQE_USER_DATA = CQE.byteOffset(PathElement.groupElement("user_data"));
    public static final long CQE_RES = CQE.byteOffset(PathElement.groupElement("res"));

    /** {@code IORING_OP_NOP}: first value of the op enum. */
    public static final byte OP_NOP = 0;
    /** {@code IORING_OP_READV}: second value of the op enum; {@code addr} = iovec array, {@code len} = count. */
    public static final byte OP_READV = 1;
    /** {@code IORING_OP_READ}: position 22 of the op enum (since Linux 5.6). */
    public static final byte OP_READ = 22;
    /** {@code IORING_ENTER_GETEVENTS}. */
    public static final int ENTER_GETEVENTS = 1;
    /** {@code IORING_FEAT_NODROP}: the kernel never drops a CQE on overflow. */
    public static final int FEAT_NODROP = 1 << 1;
    /** mmap offsets selecting which region of the ring fd to map. */
    public static final long OFF_SQ_RING = 0L;
    public static final long OFF_CQ_RING = 0x8000000L;
    public static final long OFF_SQES = 0x10000000L;

    private UringLayout() {}

    /** Offset of field {@code name} of a ring-offsets struct, relative to that struct. */
    static long field(StructLayout offsets, String name) {
        return offsets.byteOffset(PathElement.groupElement(name));
    }

    /** Layout of a u32 inside a mapped ring, for acquire/release access. */
    static final ValueLayout.OfInt RING_U32 = JAVA_INT;
}
