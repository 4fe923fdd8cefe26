package io.orbitkv.core.storage.dram;

import java.util.Objects;

/**
 * Outcome of {@link DramTier#reserve}: a writable slot, the news that the key is already
 * resident (nothing to write), or a refusal with its reason. None of these is an exception.
 */
public sealed interface ReserveResult permits Reservation, ReserveResult.AlreadyResident, ReserveResult.Full {

    /** The key already has a committed image; publishing it again would be wasted bytes. */
    record AlreadyResident(long imageId) implements ReserveResult {
    }

    /** No slot was reserved, for {@code reason}. */
    record Full(FullReason reason) implements ReserveResult {
        public Full {
            Objects.requireNonNull(reason, "reason");
        }
    }

    /** Why a reservation was refused; each is counted under {@code orbitkv.dram.reservations.failed}. */
    enum FullReason {
        /** The image is larger than the largest size class. */
        NO_SIZE_CLASS,
        /** The class has no free slot, and neither pressure scan found an unleased victim of that class to evict. */
        NO_FREE_SLOT,
        /** In-flight reservations already hold {@code reservedBudgetBytes}. */
        RESERVED_BUDGET,
        /** Evicted images still pinned by leases hold more than {@code evictedLeasedBudgetBytes}. */
        EVICTED_LEASED_BUDGET,
        /** The namespace has no arenas and {@code maxArenaNamespaces} namespaces already have theirs. */
        ARENA_NAMESPACES,
        /** The publisher's tenant is at its DRAM cap and none of its own images could be evicted. */
        TENANT_QUOTA
    }
}
