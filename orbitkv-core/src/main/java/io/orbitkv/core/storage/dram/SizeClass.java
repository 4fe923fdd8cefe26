package io.orbitkv.core.storage.dram;

/**
 * One slot size class of the DRAM tier: {@code slotCount} slots of exactly {@code slotBytes}
 * each, all in one arena file.
 *
 * <p>Immutable value. {@code slotBytes} is a multiple of {@link DramArenaLayout#PAGE_BYTES}
 * (4 KiB) so every slot starts on a page boundary and can be handed to {@code O_DIRECT} I/O
 * without a bounce copy.
 *
 * @param slotBytes bytes per slot, a positive multiple of 4096
 * @param slotCount number of slots in this class, positive
 */
public record SizeClass(int slotBytes, int slotCount) {

    public SizeClass {
        if (slotBytes <= 0 || slotBytes % DramArenaLayout.PAGE_BYTES != 0) {
            throw new IllegalArgumentException(
                    "slotBytes must be a positive multiple of " + DramArenaLayout.PAGE_BYTES + ": " + slotBytes);
        }
        if (slotCount <= 0) {
            throw new IllegalArgumentException("slotCount must be positive: " + slotCount);
        }
    }

    /** Bytes of all slots of this class (the header page is not included). */
    public long capacityBytes() {
        return (long) slotBytes * slotCount;
    }
}
