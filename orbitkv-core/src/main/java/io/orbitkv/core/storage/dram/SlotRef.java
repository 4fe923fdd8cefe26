package io.orbitkv.core.storage.dram;

/**
 * Where an image's bytes are, for a process that mapped the arenas itself (see
 * {@link ArenaGeometry}): the bytes are {@code [offsetBytes, offsetBytes + lengthBytes)} of the
 * arena file of class {@code classIndex}.
 *
 * @param classIndex  which arena file
 * @param offsetBytes file offset of the slot, 4 KiB aligned
 * @param lengthBytes bytes of the image (at most the class's slot size)
 */
public record SlotRef(int classIndex, long offsetBytes, int lengthBytes) {

    public SlotRef {
        if (classIndex < 0) throw new IllegalArgumentException("classIndex must be >= 0: " + classIndex);
        if (offsetBytes % DramArenaLayout.PAGE_BYTES != 0) {
            throw new IllegalArgumentException("slot offsets are 4 KiB aligned: " + offsetBytes);
        }
        if (lengthBytes <= 0) throw new IllegalArgumentException("lengthBytes must be positive: " + lengthBytes);
    }
}
