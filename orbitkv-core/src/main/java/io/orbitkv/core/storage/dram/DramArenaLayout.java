package io.orbitkv.core.storage.dram;

import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.file.Path;

import static java.lang.foreign.MemoryLayout.PathElement.groupElement;

/**
 * The format of a DRAM-tier arena, an anonymous shared-memory file: the single definition that
 * the Manager, the Java client and the Python client ({@code mmap} + {@code struct}) follow.
 *
 * <h2>Files</h2>
 * One {@code memfd} per size class and per namespace (named {@code <arenaName>.ns<id>.c<class>}
 * for {@code /proc/<pid>/fd} listings only), created at its fixed size, sparse, the first time the
 * namespace needs it, mapped {@code READ_WRITE}/{@code MAP_SHARED}, and closed when the tier
 * closes; it exists on no file system. An engine receives its namespace's descriptors over the
 * descriptor socket ({@code SCM_RIGHTS}, protocol §6.11) and maps them; a client that still has
 * one mapped after the Manager stopped keeps valid (orphaned) memory. {@link #fileOf} names the files of the format's earlier placement in a
 * directory, which the Manager no longer creates.
 *
 * <h2>Geometry</h2>
 * <pre>
 *  offset 0                4096            4096 + S          4096 + 2S               fileBytes
 *  +-----------------------+---------------+-----------------+-----   ...   ---------+
 *  | header page (4 KiB)   | slot 0        | slot 1          |      ...   slot N-1   |
 *  +-----------------------+---------------+-----------------+-----   ...   ---------+
 *  S = slotBytes (multiple of 4096), N = slotCount, fileBytes = 4096 + S * N
 * </pre>
 * Slot {@code i} of a class starts at {@code 4096 + i * slotBytes}, so every slot is 4 KiB
 * aligned in the file and, because {@code mmap} returns page-aligned addresses, in memory: a
 * slot can be the buffer of an {@code O_DIRECT} SSD write without a copy. The bytes of an image
 * are the first {@code lengthBytes} of its slot; the rest of the slot is undefined.
 *
 * <h2>Header (little-endian)</h2>
 * <pre>
 *  offset size field             value
 *  0      8    magic             "OKVDRAM1" (ASCII bytes; 0x314D415244564B4F as a LE u64)
 *  8      4    version           1
 *  12     4    classIndex        0 = smallest class
 *  16     4    slotBytes
 *  20     4    slotCount
 *  24     8    firstSlotOffset   4096
 *  32     8    fileBytes
 *  40     8    incarnation       random 63-bit value per tier opening (also in {@link ArenaGeometry})
 *  48..4095    zero
 * </pre>
 * Python: {@code struct.unpack_from("<QIIIIQQQ", mm, 0)}.
 *
 * <p>Publication rule: the Manager writes every other header field first and the magic last;
 * a reader that sees the magic sees a complete header. Clients learn the geometry from the
 * REGISTER reply, which is sent only after the tier opened, so in practice the header is always
 * complete; it is a self-check (right file, right incarnation), not the discovery channel.
 * Slot contents carry no header: which image lives in which slot is said only by the Manager's
 * replies ({@link SlotRef} under a lease or a reservation).
 *
 * <p>Design note: one file per class rather than one file carved into regions keeps every
 * offset computation a multiply and lets a class grow later by creating a second file without
 * moving the others; the cost is one mapping per class (3 by default), negligible next to the
 * 64 MiB+ of each.
 */
public final class DramArenaLayout {

    /** Alignment of the header and of every slot, in bytes (the x86-64 page, and O_DIRECT's unit). */
    public static final int PAGE_BYTES = 4096;
    /** Bytes before slot 0. */
    public static final long FIRST_SLOT_OFFSET = PAGE_BYTES;
    /** "OKVDRAM1" as a little-endian u64. */
    public static final long MAGIC = 0x314D415244564B4FL;
    /** Current format version. */
    public static final int VERSION = 1;
    /** File name suffix. */
    public static final String SUFFIX = ".arena";

    private static final ValueLayout.OfLong LE_LONG = ValueLayout.JAVA_LONG.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt LE_INT = ValueLayout.JAVA_INT.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** The header's fields; padded with zeros up to {@link #PAGE_BYTES}. */
    public static final StructLayout HEADER = MemoryLayout.structLayout(
            LE_LONG.withName("magic"),
            LE_INT.withName("version"),
            LE_INT.withName("classIndex"),
            LE_INT.withName("slotBytes"),
            LE_INT.withName("slotCount"),
            LE_LONG.withName("firstSlotOffset"),
            LE_LONG.withName("fileBytes"),
            LE_LONG.withName("incarnation"));

    private static final long MAGIC_OFFSET = HEADER.byteOffset(groupElement("magic"));
    private static final long VERSION_OFFSET = HEADER.byteOffset(groupElement("version"));
    private static final long CLASS_INDEX_OFFSET = HEADER.byteOffset(groupElement("classIndex"));
    private static final long SLOT_BYTES_OFFSET = HEADER.byteOffset(groupElement("slotBytes"));
    private static final long SLOT_COUNT_OFFSET = HEADER.byteOffset(groupElement("slotCount"));
    private static final long FIRST_SLOT_OFFSET_OFFSET = HEADER.byteOffset(groupElement("firstSlotOffset"));
    private static final long FILE_BYTES_OFFSET = HEADER.byteOffset(groupElement("fileBytes"));
    private static final long INCARNATION_OFFSET = HEADER.byteOffset(groupElement("incarnation"));

    private DramArenaLayout() {
    }

    /** The header of an arena file as read back; {@link #valid()} checks magic and version. */
    public record Header(long magic, int version, int classIndex, int slotBytes, int slotCount,
                         long firstSlotOffset, long fileBytes, long incarnation) {

        /** True when the magic and version are this format's. */
        public boolean valid() {
            return magic == MAGIC && version == VERSION;
        }
    }

    /** The file of class {@code classIndex} whose slots are {@code slotBytes} each. */
    public static Path fileOf(Path directory, String arenaName, int classIndex, int slotBytes) {
        return directory.resolve(arenaName + ".c" + classIndex + "-" + (slotBytes / 1024) + "k" + SUFFIX);
    }

    /** Size of the file of a class. */
    public static long fileBytes(SizeClass sizeClass) {
        return FIRST_SLOT_OFFSET + sizeClass.capacityBytes();
    }

    /** Writes the header of class {@code classIndex} at offset 0; the magic last. */
    static void writeHeader(MemorySegment file, int classIndex, SizeClass sizeClass, long incarnation) {
        file.asSlice(0, PAGE_BYTES).fill((byte) 0);
        file.set(LE_INT, VERSION_OFFSET, VERSION);
        file.set(LE_INT, CLASS_INDEX_OFFSET, classIndex);
        file.set(LE_INT, SLOT_BYTES_OFFSET, sizeClass.slotBytes());
        file.set(LE_INT, SLOT_COUNT_OFFSET, sizeClass.slotCount());
        file.set(LE_LONG, FIRST_SLOT_OFFSET_OFFSET, FIRST_SLOT_OFFSET);
        file.set(LE_LONG, FILE_BYTES_OFFSET, fileBytes(sizeClass));
        file.set(LE_LONG, INCARNATION_OFFSET, incarnation);
        file.set(LE_LONG, MAGIC_OFFSET, MAGIC);
    }

    /** Reads the header at offset 0 of a mapped arena file (any mapping of it). */
    public static Header readHeader(MemorySegment file) {
        return new Header(
                file.get(LE_LONG, MAGIC_OFFSET),
                file.get(LE_INT, VERSION_OFFSET),
                file.get(LE_INT, CLASS_INDEX_OFFSET),
                file.get(LE_INT, SLOT_BYTES_OFFSET),
                file.get(LE_INT, SLOT_COUNT_OFFSET),
                file.get(LE_LONG, FIRST_SLOT_OFFSET_OFFSET),
                file.get(LE_LONG, FILE_BYTES_OFFSET),
                file.get(LE_LONG, INCARNATION_OFFSET));
    }
}
