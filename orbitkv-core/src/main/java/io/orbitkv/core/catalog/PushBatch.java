package io.orbitkv.core.catalog;

import io.orbitkv.core.storage.residency.ResidencyEvent;
import java.util.List;

/**
 * One batch on the residency stream from a source incarnation to a shard-owner incarnation.
 * Batches are numbered from 1 at each snapshot; a snapshot's first batch has
 * {@code snapshotBegin} (it resets the source's entries on the owner) and the batch completing it
 * {@code snapshotEnd}. A snapshot's deltas are all {@code ADDED}, one per resident image.
 *
 * <p>Handoff: after a membership change, a source whose stream to an owner was caught up does not
 * resend a snapshot; it sends the keys the owner gains ({@code ADDED}) and loses ({@code REMOVED})
 * under the new placement as ordinary deltas, and flags the batch that completes them
 * {@code handoffEnd}. A batch whose {@code viewDigest} differs from the one the owner holds for the
 * source marks that source's table as being handed off (never "absent" evidence) until the
 * {@code handoffEnd} batch, which sets the new placement version.
 *
 * @param viewDigest {@link MembershipView#digest()} of the live view the source sharded under: the
 *                   placement version
 * @param handoffEnd with this batch the owner's table for this source is complete under
 *                   {@code viewDigest}
 */
public record PushBatch(String sourceNode, long sourceIncarnation, long ownerIncarnation, long batch,
                        boolean snapshotBegin, boolean snapshotEnd, long viewDigest, List<ResidencyEvent> deltas,
                        boolean handoffEnd) {

    public PushBatch {
        Member.requireNodeId(sourceNode);
        if (sourceIncarnation < 1 || ownerIncarnation < 1) throw new IllegalArgumentException("incarnations are >= 1");
        if (batch < 1) throw new IllegalArgumentException("batch numbers start at 1");
        if (snapshotBegin && batch != 1) throw new IllegalArgumentException("a snapshot begins at batch 1");
        deltas = List.copyOf(deltas);
    }

    /** A batch that ends no handoff. */
    public PushBatch(String sourceNode, long sourceIncarnation, long ownerIncarnation, long batch,
                     boolean snapshotBegin, boolean snapshotEnd, long viewDigest, List<ResidencyEvent> deltas) {
        this(sourceNode, sourceIncarnation, ownerIncarnation, batch, snapshotBegin, snapshotEnd, viewDigest, deltas, false);
    }

    /** How a shard owner took a batch. */
    public enum Result {
        /** Applied; the next batch number is this one + 1. */
        APPLIED,
        /** The owner has no usable state for this source (it restarted, a batch was lost, or the
         *  source restarted): send a snapshot. */
        NEED_SNAPSHOT,
        /** The owner has seen a newer incarnation of this source: the sender is stale and refused. */
        STALE_INCARNATION,
        /** The batch was meant for another incarnation of the owner (it restarted): the reply
         *  carries the current one; resend a snapshot to it. */
        WRONG_OWNER_INCARNATION
    }

    /** The owner's answer, with its incarnation. */
    public record Reply(Result result, long ownerIncarnation) {
    }
}
