package io.orbitkv.core.storage.dram;

import io.orbitkv.state.StateKey;


/**
 * A read pin on one resident image: while it is held, the image's slot is not reused, even if
 * the image is evicted from the index meanwhile. Gives a read-only view of the bytes and, for
 * a reader in another process, their place in the arena file ({@link SlotClaim}).
 *
 * <p>Thread model: may be released from any thread. {@link #release()} is the claim's one-shot
 * end, so exactly one call releases and any other (double release, concurrent release) is a
 * no-op that returns {@link ReleaseResult#ALREADY_RELEASED} without touching the reference count.
 * {@link #close()} releases too, for try-with-resources. Reads must end before release: the
 * segment is a view of the shared mapping, so after release it may show another image's bytes.
 */
public final class Lease extends SlotClaim implements AcquireResult, AutoCloseable {

    /** The terminal state of a released lease ({@link DramTier#releaseAll} ends leases in bulk). */
    static final int RELEASED = 1;

    Lease(DramTier owner, StateKey key, int namespaceId, int slot, long imageId, SlotRef slotRef) {
        super(owner, key, namespaceId, slot, imageId, slotRef);
    }

    @Override
    boolean writable() {
        return false;
    }

    /** True until released. */
    public boolean isHeld() {
        return open();
    }

    /**
     * Marks this image as needed by a settled hit (the retention ledger's "needed",
     * {@code RetentionLedger#needed}): true the first time for the image, false when a hit marked
     * it before, so its ledger entry is needed already and need not be probed again.
     */
    public boolean markNeeded() {
        return owner().markNeeded(slot(), imageId());
    }

    /** Ends the lease; only the first call has an effect. */
    public ReleaseResult release() {
        if (!end(RELEASED)) return ReleaseResult.ALREADY_RELEASED;
        owner().unpin(slot(), imageId());
        return ReleaseResult.RELEASED;
    }

    @Override
    public void close() {
        release();
    }

    @Override
    public String toString() {
        return "Lease[" + key() + ", image " + imageId() + ", " + slotRef() + (isHeld() ? "]" : ", released]");
    }
}
