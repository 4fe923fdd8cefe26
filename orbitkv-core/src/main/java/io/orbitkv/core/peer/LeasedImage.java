package io.orbitkv.core.peer;

import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.state.StateKey;

import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * A {@link PinnedImage} backed by a DRAM {@link Lease} of the source's tier. For an SSD source
 * the lease is the one {@code TieredStore.stage} returned, so the bytes sent are the staged DRAM
 * copy and the SSD extent itself is never read by a transfer.
 *
 * @param lease      the lease pinning the payload
 * @param generation the generation the requester was authorized for
 */
public record LeasedImage(Lease lease, long generation) implements PinnedImage {

    public LeasedImage {
        Objects.requireNonNull(lease, "lease");
    }

    @Override
    public StateKey key() {
        return lease.key();
    }

    @Override
    public long imageId() {
        return lease.imageId();
    }

    @Override
    public MemorySegment payload() {
        return lease.segment();
    }

    @Override
    public void release() {
        lease.release();
    }
}
