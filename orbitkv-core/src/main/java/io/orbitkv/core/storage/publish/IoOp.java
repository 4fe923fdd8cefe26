package io.orbitkv.core.storage.publish;

import java.util.concurrent.CompletableFuture;

/**
 * One SSD operation waiting in the {@link SsdIoDispatcher}: either started (once, when a
 * submission slot is free and the scheduler picks it) or dropped (never started), never both.
 *
 * <p>The dispatcher calls {@link #start()} on whichever thread frees a slot (a submitter or an
 * I/O worker completing the previous operation), so it must only submit work, never block.
 * {@link #drop(DropReason)} releases whatever the operation holds (a DRAM lease, an SSD pin, a
 * reservation) and completes its caller's future with a value.
 */
public interface IoOp {

    /** Why a queued operation was dropped instead of started. */
    enum DropReason {
        /** The write lane was full and this was its oldest write. */
        LANE_FULL,
        /** The dispatcher closed before the operation's turn. */
        CLOSED
    }

    /** Submits the operation; the future completes when the device work is done (any result). */
    CompletableFuture<?> start();

    /** The operation will never start; release its resources. */
    void drop(DropReason reason);
}
