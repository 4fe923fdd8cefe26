package io.orbitkv.core.peer;

import io.orbitkv.state.StateKey;

import java.lang.foreign.MemorySegment;

/**
 * The exact generation of one page, held in the source's host memory for as long as a ticket
 * needs it (a DRAM lease, possibly obtained by staging an SSD extent). Owned by one ticket of
 * the {@link TicketTable}; released exactly once when the ticket is freed.
 */
public interface PinnedImage {

    StateKey key();

    /** The generation the requester named and the source pinned (DRAM image id or SSD generation). */
    long generation();

    /**
     * The DRAM image whose bytes {@link #payload()} shows (for an SSD read, the staged copy's):
     * unique among the tier's images for the process's life, and its bytes never change.
     */
    long imageId();

    /** Read-only view of the payload, valid until {@link #release()}. */
    MemorySegment payload();

    /** Releases the pin; only the first call has an effect. */
    void release();
}
