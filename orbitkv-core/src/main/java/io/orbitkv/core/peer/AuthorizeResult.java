package io.orbitkv.core.peer;

import io.orbitkv.state.StateKey;

import java.util.Objects;

/** The source's answer to an {@link AuthorizeRequest}: a ticket to read, or a refusal with its reason. */
public sealed interface AuthorizeResult {

    /** Why a source refused; every refusal means "miss this page from this owner", never an error. */
    enum Rejection {
        /** The requester planned against another incarnation of this source. */
        STALE_SOURCE_INCARNATION,
        /** Membership does not show the requester's incarnation as live. */
        STALE_REQUESTER_INCARNATION,
        /** The requester claims a residency sequence this source never produced (another life's evidence). */
        SEQUENCE_AHEAD,
        /** This source does not know the namespace, or the page belongs to another one. */
        NAMESPACE_MISMATCH,
        /** The named generation is no longer held on the named medium. */
        GENERATION_GONE,
        /** Staging an SSD page into host memory was refused for now (DRAM or staging table full). */
        SOURCE_BUSY,
        /** The ticket table is full. */
        TICKET_TABLE_FULL,
        /** The source cannot take new remote work (closing, or its own registration is not valid). */
        NOT_SERVING,
        /** The request did not reach the source or its reply was lost (set by the requester's transport). */
        UNREACHABLE
    }

    /**
     * A ticket: the requester may stream the page under {@code ticketId} within {@code windowNanos}.
     *
     * @param ticketId          the source's ticket id
     * @param sourceIncarnation the incarnation that issued it
     * @param key               the page
     * @param lengthBytes       payload length the requester reserves for
     * @param windowNanos       how long the source keeps the ticket without a release
     */
    record Granted(long ticketId, long sourceIncarnation, StateKey key, int lengthBytes, long windowNanos)
            implements AuthorizeResult {
        public Granted {
            Objects.requireNonNull(key, "key");
            if (ticketId <= 0) throw new IllegalArgumentException("ticketId: " + ticketId);
            if (lengthBytes <= 0) throw new IllegalArgumentException("lengthBytes: " + lengthBytes);
        }
    }

    record Rejected(Rejection reason) implements AuthorizeResult {
        public Rejected {
            Objects.requireNonNull(reason, "reason");
        }
    }
}
