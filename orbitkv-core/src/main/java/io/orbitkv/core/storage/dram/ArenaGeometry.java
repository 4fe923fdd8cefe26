package io.orbitkv.core.storage.dram;

import java.util.List;
import java.util.Objects;

/**
 * Everything another process needs to map the DRAM tier's arenas: one entry per size class,
 * each with its descriptor, the file's size and where its slots lie. The Manager sends the sizes in
 * REGISTERED and the descriptors over the descriptor socket; slot references ({@link SlotRef}) in
 * later replies are relative to it.
 *
 * <p>Immutable value. See {@link DramArenaLayout} for the file format this describes.
 *
 * @param incarnation random non-negative value per tier opening, also written in every arena
 *                    header: a client that finds another value there has mapped a file of
 *                    another incarnation
 * @param arenas      one per size class, in class order (index {@code i} has classIndex {@code i})
 */
public record ArenaGeometry(long incarnation, List<ClassArena> arenas) {

    public ArenaGeometry {
        if (incarnation < 0) throw new IllegalArgumentException("incarnation must be >= 0: " + incarnation);
        arenas = List.copyOf(arenas);
        for (int i = 0; i < arenas.size(); i++) {
            if (arenas.get(i).classIndex() != i) {
                throw new IllegalArgumentException("arena " + i + " has classIndex " + arenas.get(i).classIndex());
            }
        }
    }

    /**
     * One arena file dedicated to one size class.
     *
     * @param classIndex      position of the class, 0 = smallest slots
     * @param descriptor      the tier's own descriptor of the memfd, borrowed (valid while the tier is
     *                        open; never closed by a borrower), or -1 in the namespace-less shape
     * @param fileBytes       size of the file: {@code firstSlotOffset + slotBytes * slotCount}
     * @param slotBytes       bytes per slot, multiple of 4096
     * @param slotCount       number of slots
     * @param firstSlotOffset offset of slot 0, 4096 (the header page precedes it)
     */
    public record ClassArena(int classIndex, int descriptor, long fileBytes, int slotBytes, int slotCount,
                             long firstSlotOffset) {

        public ClassArena {
            if (descriptor < -1) throw new IllegalArgumentException("descriptor must be >= -1: " + descriptor);
            if (classIndex < 0) throw new IllegalArgumentException("classIndex must be >= 0: " + classIndex);
            if (slotBytes <= 0 || slotBytes % DramArenaLayout.PAGE_BYTES != 0) {
                throw new IllegalArgumentException("slotBytes must be a positive multiple of 4096: " + slotBytes);
            }
            if (slotCount <= 0) throw new IllegalArgumentException("slotCount must be positive: " + slotCount);
            if (firstSlotOffset % DramArenaLayout.PAGE_BYTES != 0) {
                throw new IllegalArgumentException("firstSlotOffset must be 4 KiB aligned: " + firstSlotOffset);
            }
            if (fileBytes != firstSlotOffset + (long) slotBytes * slotCount) {
                throw new IllegalArgumentException("fileBytes " + fileBytes + " does not match the slots");
            }
        }

        /** File offset of slot {@code slotInClass}; always 4 KiB aligned. */
        public long slotOffset(int slotInClass) {
            Objects.checkIndex(slotInClass, slotCount);
            return firstSlotOffset + (long) slotBytes * slotInClass;
        }
    }
}
