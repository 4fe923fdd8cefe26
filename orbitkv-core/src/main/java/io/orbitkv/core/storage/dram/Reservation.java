package io.orbitkv.core.storage.dram;

import io.orbitkv.state.StateKey;


/**
 * A slot reserved for one image that is being published: writable, not yet visible to readers.
 * The publisher writes the image into {@link #segment()} (or, from another process, at
 * {@link #slotRef()} in its own mapping) and then calls {@link DramTier#commit} or
 * {@link DramTier#abort} exactly once; a second call changes nothing and says so. Writes must
 * end before that call: afterwards the slot may already hold another image, and the segment (a
 * view of the shared mapping) cannot be revoked per reservation.
 *
 * <p>Thread model: owned by the publishing thread; may be handed to another thread for commit.
 * The open/committed/aborted transition is the claim's one-shot end ({@link SlotClaim#end}), so
 * concurrent commit and abort cannot both take effect.
 */
public final class Reservation extends SlotClaim implements ReserveResult {

    static final int COMMITTED = 1;
    static final int ABORTED = 2;

    /** Set by the publisher before the commit; read by the committing thread. */
    private volatile ChainLink chain = ChainLink.NONE;

    /** {@code blockSegment}: writable view of the slot's first {@code lengthBytes} rounded up to 4 KiB. */
    Reservation(DramTier owner, StateKey key, int namespaceId, int slot, long imageId, SlotRef slotRef) {
        super(owner, key, namespaceId, slot, imageId, slotRef);
    }

    @Override
    boolean writable() {
        return true;
    }

    /** Records where this page sits in its chain, for a chain-aware policy; before the commit. */
    public void chain(ChainLink link) {
        this.chain = java.util.Objects.requireNonNull(link, "link");
    }

    ChainLink chainLink() {
        return chain;
    }

    /** True until committed or aborted. */
    public boolean isOpen() {
        return open();
    }

    @Override
    public String toString() {
        return "Reservation[" + key() + ", image " + imageId() + ", " + slotRef() + "]";
    }
}
