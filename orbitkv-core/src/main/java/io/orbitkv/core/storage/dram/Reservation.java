package io.orbitkv.core.storage.dram;

import io.orbitkv.state.StateKey;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * A slot reserved for one image that is being published: writable, not yet visible to readers.
 * The publisher writes the image into {@link #segment()} (or, from another process, at
 * {@link #slotRef()} in its own mapping) and then calls {@link DramTier#commit} or
 * {@link DramTier#abort} exactly once; a second call changes nothing and says so. Writes must
 * end before that call: afterwards the slot may already hold another image, and the segment (a
 * view of the shared mapping) cannot be revoked per reservation.
 *
 * <p>Thread model: owned by the publishing thread; may be handed to another thread for commit.
 * The open/committed/aborted transition is one CAS, so concurrent commit and abort cannot both
 * take effect.
 */
public final class Reservation implements ReserveResult {

    static final int OPEN = 0;
    static final int COMMITTED = 1;
    static final int ABORTED = 2;

    private static final VarHandle STATE;

    static {
        try {
            STATE = MethodHandles.lookup().findVarHandle(Reservation.class, "state", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final DramTier owner;
    private final StateKey key;
    private final int namespaceId;
    private final int slot;
    private final long imageId;
    private final MemorySegment blockSegment;
    private final SlotRef slotRef;
    @SuppressWarnings("unused") // accessed through STATE
    private volatile int state;

    /** {@code blockSegment}: writable view of the slot's first {@code lengthBytes} rounded up to 4 KiB. */
    Reservation(DramTier owner, StateKey key, int namespaceId, int slot, long imageId, MemorySegment blockSegment,
                SlotRef slotRef) {
        this.owner = owner;
        this.key = key;
        this.namespaceId = namespaceId;
        this.slot = slot;
        this.imageId = imageId;
        this.blockSegment = blockSegment;
        this.slotRef = slotRef;
    }

    /** The key being published. */
    public StateKey key() {
        return key;
    }

    /** Writable view of exactly {@code lengthBytes} of the slot. */
    public MemorySegment segment() {
        return blockSegment.asSlice(0, slotRef.lengthBytes());
    }

    /**
     * Writable view of the image's bytes padded to whole 4 KiB blocks of the slot, 4 KiB aligned:
     * an {@code O_DIRECT} read can land here without a bounce copy. Bytes past
     * {@link #lengthBytes()} are not part of the image.
     */
    public MemorySegment blockSegment() {
        return blockSegment;
    }

    /** Where the slot is, for a writer in another process. */
    public SlotRef slotRef() {
        return slotRef;
    }

    /** The image id the image will have once committed. */
    public long imageId() {
        return imageId;
    }

    public int lengthBytes() {
        return slotRef.lengthBytes();
    }

    /** True until committed or aborted. */
    public boolean isOpen() {
        return state == OPEN;
    }

    DramTier owner() {
        return owner;
    }

    /** The namespace id the image will carry. */
    public int namespaceId() {
        return namespaceId;
    }

    int slot() {
        return slot;
    }

    /** Moves OPEN to {@code terminal}; false if another call already closed it. */
    boolean close(int terminal) {
        return STATE.compareAndSet(this, OPEN, terminal);
    }

    @Override
    public String toString() {
        return "Reservation[" + key + ", image " + imageId + ", " + slotRef + "]";
    }
}
