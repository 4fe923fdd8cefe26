package io.orbitkv.core.storage.dram;

import io.orbitkv.state.StateKey;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * What a {@link Lease} (a read pin on a resident image) and a {@link Reservation} (a slot being
 * published) share: one image's slot in one arena, its place in the arena file, and a one-shot
 * end. The fields come in one order for both, so that no call site can swap the adjacent
 * {@code namespaceId}, {@code slot} and {@code imageId} of one kind against the other.
 *
 * <p>Thread model: the claim may be ended from any thread; {@link #end} is one CAS from
 * {@link #OPEN} to a terminal state, so exactly one call takes effect and every other call (a
 * double release, a commit racing an abort) returns false without touching the slot table.
 */
abstract sealed class SlotClaim permits Lease, Reservation {

    /** The state until the claim ends; terminal states are the subclass's (&gt; 0). */
    static final int OPEN = 0;

    private static final VarHandle STATE;

    static {
        try {
            STATE = MethodHandles.lookup().findVarHandle(SlotClaim.class, "state", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final DramTier owner;
    private final StateKey key;
    private final int namespaceId;
    private final int slot;
    private final long imageId;
    private final SlotRef slotRef;
    @SuppressWarnings("unused") // accessed through STATE
    private volatile int state;

    SlotClaim(DramTier owner, StateKey key, int namespaceId, int slot, long imageId, SlotRef slotRef) {
        this.owner = owner;
        this.key = key;
        this.namespaceId = namespaceId;
        this.slot = slot;
        this.imageId = imageId;
        this.slotRef = slotRef;
    }

    /** The key of the image. */
    public StateKey key() {
        return key;
    }

    /** The residency generation of the image. */
    public long imageId() {
        return imageId;
    }

    /** The namespace id the image carries (queries only serve images of their own namespace). */
    public int namespaceId() {
        return namespaceId;
    }

    /** Exactly the image's bytes: read-only for a lease, writable for a reservation. */
    public MemorySegment segment() {
        return blockSegment().asSlice(0, slotRef.lengthBytes());
    }

    /**
     * The image's bytes padded to whole 4 KiB blocks of the slot, 4 KiB aligned: what an
     * {@code O_DIRECT} write can take (lease) or an {@code O_DIRECT} read can land in
     * (reservation) without a bounce copy. Bytes past {@link #lengthBytes()} carry no meaning.
     * Made on each call, not with the claim: most leases (a QUERY's, read by the engine through
     * {@link #slotRef()}) never touch their bytes in this process.
     */
    public MemorySegment blockSegment() {
        MemorySegment block = owner.blockSlice(namespaceId, slot, slotRef.lengthBytes());
        return writable() ? block : block.asReadOnly();
    }

    /** Whether the claim's bytes may be written through it (a reservation) or only read (a lease). */
    abstract boolean writable();

    /** Where the bytes are in the arena file, for a reader or writer in another process. */
    public SlotRef slotRef() {
        return slotRef;
    }

    public int lengthBytes() {
        return slotRef.lengthBytes();
    }

    int slot() {
        return slot;
    }

    DramTier owner() {
        return owner;
    }

    /** True until {@link #end} took effect. */
    final boolean open() {
        return state == OPEN;
    }

    /** Moves {@link #OPEN} to {@code terminal}; false if the claim had already ended. */
    final boolean end(int terminal) {
        return STATE.compareAndSet(this, OPEN, terminal);
    }
}
