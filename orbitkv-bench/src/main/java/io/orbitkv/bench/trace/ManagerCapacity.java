package io.orbitkv.bench.trace;

/**
 * How a capacity in blocks maps to a Manager's DRAM and SSD sizes, for one slot class of
 * exactly one block's page.
 *
 * <p>DRAM: the Manager's index may hold {@code dramBytes - stagingBytes - dramBytes/8} bytes of
 * resident pages (the reserved budget for in-flight publishes and stagings, and the
 * evicted-but-leased budget of an eighth, stay free; docs/operations.md, {@code stagingBytes}),
 * so {@link #dramBytesFor} picks the smallest whole number of slots whose index bound is exactly
 * {@code blocks} pages. SSD: an extent of a page takes {@code 4096 + roundUp(pageBytes, 4096)}
 * bytes of one ring file (docs/storage-formats.md), so {@link #ssdBytesFor} is that times the
 * blocks, in one file. The replay measures what the Manager really held afterwards (/status).
 */
public final class ManagerCapacity {

    /**
     * The smallest SSD store the Manager accepts whatever the slot size: its configuration checks
     * the ring file against an extent of the default largest slot (2 MiB) before it applies
     * {@code dramSlotBytes}, so a file must hold one 2 MiB extent (4 KiB header + 2 MiB).
     */
    public static final long MIN_SSD_BYTES = 4096 + (2L << 20);

    private ManagerCapacity() {}

    /** Pages the DRAM index of {@code dramBytes} holds with slots of {@code slotBytes} and {@code stagingBytes}. */
    public static long indexPages(long dramBytes, int slotBytes, long stagingBytes) {
        long capacity = dramBytes / slotBytes * slotBytes;
        return Math.max(0, (capacity - stagingBytes - capacity / 8) / slotBytes);
    }

    /** The smallest {@code dramBytes} (whole slots) whose index holds exactly {@code blocks} pages. */
    public static long dramBytesFor(long blocks, int slotBytes, long stagingBytes) {
        if (blocks < 1) throw new IllegalArgumentException("blocks must be >= 1: " + blocks);
        long slots = Math.max(1, (long) Math.floor((blocks * (double) slotBytes + stagingBytes) * 8 / 7 / slotBytes) - 2);
        while (indexPages(slots * slotBytes, slotBytes, stagingBytes) < blocks) slots++;
        return slots * slotBytes;
    }

    /** SSD ring bytes that hold {@code blocks} extents of {@code pageBytes}. */
    public static long ssdBytesFor(long blocks, int pageBytes) {
        return Math.max(MIN_SSD_BYTES, blocks * extentBytes(pageBytes));
    }

    /** One extent's footprint in a ring file. */
    public static long extentBytes(int pageBytes) {
        return 4096 + ((pageBytes + 4095L) / 4096) * 4096;
    }
}
