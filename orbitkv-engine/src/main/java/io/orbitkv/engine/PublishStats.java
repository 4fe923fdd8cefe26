package io.orbitkv.engine;

/**
 * Cumulative publish counts of an {@link OrbitKvPageStore} since it connected. A synchronous store
 * fills only {@code sealed}, {@code alreadyPresent} and {@code refused}; a store that publishes in
 * the background fills them as its queued batches settle, and the queue's own counts.
 *
 * @param pagesQueued           pages accepted into the background queue
 * @param sealed                pages the Manager sealed
 * @param alreadyPresent        pages the Manager already held (or another publisher sealed first)
 * @param refused               pages the Manager refused (no space, busy, a refusal of the whole publish)
 * @param droppedFull           pages dropped when offered because the queue's byte budget was full (or it was closed)
 * @param droppedFailed         pages of batches whose publish failed (connection closed, Manager gone, timeout)
 * @param droppedClosed         pages of batches abandoned by close
 * @param errors                background publishes that failed with an exception
 * @param queuedBytes           image bytes queued now
 * @param queuedBytesHighWater  the most image bytes ever queued at once
 * @param heldBytes             bytes of batch buffers allocated and not yet freed (queued plus the one in flight);
 *                              0 once the store is closed
 */
public record PublishStats(long pagesQueued, long sealed, long alreadyPresent, long refused, long droppedFull,
                           long droppedFailed, long droppedClosed, long errors, long queuedBytes,
                           long queuedBytesHighWater, long heldBytes) {

    /** Pages dropped for any reason: not published, recomputed when asked for again. */
    public long dropped() {
        return droppedFull + droppedFailed + droppedClosed;
    }
}
