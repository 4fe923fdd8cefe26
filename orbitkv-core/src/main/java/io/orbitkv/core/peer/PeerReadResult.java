package io.orbitkv.core.peer;

import io.orbitkv.core.storage.dram.Lease;

import java.util.Objects;

/** Outcome of one {@link PeerReader#read}: the page is now in local DRAM, or it is a miss (recompute). */
public sealed interface PeerReadResult {

    /** Why a peer read produced nothing, apart from a source's refusal. */
    enum MissReason {
        /** Membership evidence or this Manager's registration is not valid: no new remote work. */
        MEMBERSHIP_INVALID,
        /** No local DRAM slot could be reserved for the payload. */
        LOCAL_DRAM_FULL,
        /** The stream broke, timed out or was cancelled before all bytes and the trailer arrived. */
        TRANSFER_BROKEN,
        /** The source refused the transfer under the ticket (expired or revoked meanwhile). */
        TRANSFER_REFUSED,
        /** Bytes arrived but failed verification (short, malformed or CRC32C mismatch); discarded. */
        DISCARDED,
        /** The ticket's length does not fit the page as planned. */
        LENGTH_MISMATCH
    }

    /** The page is resident locally and leased to the caller, who must release the lease. */
    record Fetched(Lease lease, PeerCandidate from) implements PeerReadResult {
        public Fetched {
            Objects.requireNonNull(lease, "lease");
            Objects.requireNonNull(from, "from");
        }
    }

    /** The source refused: update only that owner's evidence and replan. */
    record Refused(PeerCandidate from, AuthorizeResult.Rejection reason) implements PeerReadResult {
        public Refused {
            Objects.requireNonNull(from, "from");
            Objects.requireNonNull(reason, "reason");
        }

        /** Whether the refusal condemns every page of the owner, not only this one. */
        public boolean ownerWide() {
            return switch (reason) {
                case STALE_SOURCE_INCARNATION, STALE_REQUESTER_INCARNATION, SEQUENCE_AHEAD, NOT_SERVING,
                     UNREACHABLE -> true;
                case NAMESPACE_MISMATCH, GENERATION_GONE, SOURCE_BUSY, TICKET_TABLE_FULL -> false;
            };
        }
    }

    record Miss(PeerCandidate from, MissReason reason) implements PeerReadResult {
        public Miss {
            Objects.requireNonNull(from, "from");
            Objects.requireNonNull(reason, "reason");
        }
    }
}
