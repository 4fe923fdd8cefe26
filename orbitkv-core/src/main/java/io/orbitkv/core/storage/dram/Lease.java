package io.orbitkv.core.storage.dram;

import io.orbitkv.state.StateKey;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * A read pin on one resident image: while it is held, the image's slot is not reused, even if
 * the image is evicted from the index meanwhile. Gives a read-only view of the bytes and, for
 * a reader in another process, their place in the arena file.
 *
 * <p>Thread model: may be released from any thread. {@link #release()} is a single CAS, so
 * exactly one call releases and any other (double release, concurrent release) is a no-op that
 * returns {@link ReleaseResult#ALREADY_RELEASED} without touching the reference count.
 * {@link #close()} releases too, for try-with-resources. Reads must end before release: the
 * segment is a view of the shared mapping, so after release it may show another image's bytes.
 */
public final class Lease implements AcquireResult, AutoCloseable {

    private static final VarHandle RELEASED;

    static {
        try {
            RELEASED = MethodHandles.lookup().findVarHandle(Lease.class, "released", boolean.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final DramTier owner;
    private final StateKey key;
    private final int slot;
    private final long imageId;
    private final int namespaceId;
    private final MemorySegment blockSegment;
    private final SlotRef slotRef;
    @SuppressWarnings("unused") // accessed through RELEASED
    private volatile boolean released;

    /** {@code blockSegment}: read-only view of the image rounded up to whole 4 KiB blocks of its slot. */
    Lease(DramTier owner, StateKey key, int slot, long imageId, int namespaceId, MemorySegment blockSegment,
          SlotRef slotRef) {
        this.owner = owner;
        this.key = key;
        this.slot = slot;
        this.imageId = imageId;
        this.namespaceId = namespaceId;
        this.blockSegment = blockSegment;
        this.slotRef = slotRef;
    }

    public StateKey key() {
        return key;
    }

    /** The residency generation of the leased image. */
    public long imageId() {
        return imageId;
    }

    /** The namespace id the image was committed with (queries only serve images of their own namespace). */
    public int namespaceId() {
        return namespaceId;
    }

    /** Read-only view of the image's bytes; valid until release (and while the tier is open). */
    public MemorySegment segment() {
        return blockSegment.asSlice(0, slotRef.lengthBytes());
    }

    /**
     * Read-only view of the image padded to whole 4 KiB blocks of its slot (4 KiB aligned): what
     * an {@code O_DIRECT} write can take without a bounce copy. Bytes past
     * {@link #lengthBytes()} are whatever the slot held before and carry no meaning.
     */
    public MemorySegment blockSegment() {
        return blockSegment;
    }

    /** Where the bytes are in the arena file. */
    public SlotRef slotRef() {
        return slotRef;
    }

    public int lengthBytes() {
        return slotRef.lengthBytes();
    }

    /** True until released. */
    public boolean isHeld() {
        return !released;
    }

    /** Ends the lease; only the first call has an effect. */
    public ReleaseResult release() {
        if (!RELEASED.compareAndSet(this, false, true)) return ReleaseResult.ALREADY_RELEASED;
        owner.unpin(slot, imageId);
        return ReleaseResult.RELEASED;
    }

    @Override
    public void close() {
        release();
    }

    int slot() {
        return slot;
    }

    DramTier owner() {
        return owner;
    }

    @Override
    public String toString() {
        return "Lease[" + key + ", image " + imageId + ", " + slotRef + (released ? ", released]" : "]");
    }
}
