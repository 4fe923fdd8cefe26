package io.orbitkv.core.storage.dram;

import io.orbitkv.state.StateKey;

import java.util.Objects;

/**
 * A resident image that {@link DramTier#hold} made unevictable (a HINT PIN): the page (key and
 * namespace id) and the exact image, so that {@link DramTier#releaseHold} lets go of this image and no later one in its slot,
 * and the slot bytes it keeps from other images (what a pinned-byte budget counts).
 *
 * <p>Value; immutable.
 */
public record HeldImage(StateKey key, int namespaceId, int slot, long imageId, int slotBytes) {
    public HeldImage {
        Objects.requireNonNull(key, "key");
    }
}
