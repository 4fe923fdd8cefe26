package io.orbitkv.core.storage.dram;

/**
 * A consistent snapshot of the tier's byte accounting, all in slot bytes (an image of 10 KiB in
 * a 64 KiB slot counts 64 KiB: the arena, not the payload, is the scarce resource).
 *
 * <p>Invariant, checked in the compact constructor: every slot is in exactly one state, so
 * {@code freeBytes + reservedBytes + usedBytes + evictedLeasedBytes == capacityBytes}.
 * {@code leasedBytes} overlaps {@code usedBytes + evictedLeasedBytes} (slots with at least one
 * lease, counted once however many leases they have).
 *
 * @param capacityBytes      all slot bytes
 * @param freeBytes          slots on a free list
 * @param reservedBytes      slots reserved for a publish, not yet committed or aborted
 * @param usedBytes          slots of images in the index (resident)
 * @param evictedLeasedBytes slots of images removed from the index but still leased
 * @param leasedBytes        slots with at least one lease (resident or evicted)
 * @param leases             outstanding leases
 * @param residentImages     images in the index
 */
public record DramUsage(long capacityBytes, long freeBytes, long reservedBytes, long usedBytes,
                        long evictedLeasedBytes, long leasedBytes, long leases, long residentImages) {

    public DramUsage {
        if (freeBytes + reservedBytes + usedBytes + evictedLeasedBytes != capacityBytes) {
            throw new IllegalStateException("byte accounting broken: free " + freeBytes + " + reserved " + reservedBytes
                    + " + used " + usedBytes + " + evictedLeased " + evictedLeasedBytes
                    + " != capacity " + capacityBytes);
        }
        if (leasedBytes > usedBytes + evictedLeasedBytes || leasedBytes < evictedLeasedBytes) {
            throw new IllegalStateException("leased bytes " + leasedBytes + " outside [evictedLeased "
                    + evictedLeasedBytes + ", used + evictedLeased " + (usedBytes + evictedLeasedBytes) + "]");
        }
    }
}
