package io.orbitkv.core.query;

import io.orbitkv.core.storage.StageResult;
import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.core.storage.dram.SlotRef;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.protocol.PageEntries;
import io.orbitkv.state.protocol.PageState;

/**
 * One required page of a query operation's selected boundary, and what the operation holds for
 * it. Mutable; confined to the owning session's lock (see {@link QueryOperation}).
 *
 * <p>Invariant: {@code lease} is held iff the state is RESIDENT or READY; {@code stagingBytes}
 * is non-zero iff the state is QUEUED, STAGING or ABANDONED (the bytes reserved from the staging
 * budget, given back when the page is dropped from the queue or its staging lands).
 */
final class PageSlot {

    /** Where the page is in the operation's life. */
    enum State {
        /** Leased in DRAM. */
        RESIDENT,
        /** On SSD, waiting in the operation's queue for a staging slot (no I/O yet). */
        QUEUED,
        /** Submitted to the store: its backing read may be running. */
        STAGING,
        /** Staging found nothing servable (corrupt, I/O error, evicted, busy), or the page was given up. */
        FAILED,
        /** A peer fetch given up at the peer wait bound while in flight: its result is released when it lands. */
        ABANDONED,
        /** Copied into the engine's region by a RESTORE; still leased. */
        READY
    }

    final int groupId;
    final long page;
    final StateKey key;
    /** Held only by peers when planned: fetched with the operation's other peer pages in one batch. */
    final boolean remote;
    State state;
    /** Where the page came from (or is being staged from), for the per-tier hit metrics. */
    QueryMetrics.Tier tier;
    Lease lease;
    long stagingBytes;

    private PageSlot(int groupId, long page, StateKey key, boolean remote, State state, Lease lease, long stagingBytes) {
        this.groupId = groupId;
        this.page = page;
        this.key = key;
        this.remote = remote;
        this.state = state;
        this.tier = lease != null ? QueryMetrics.Tier.DRAM : remote ? QueryMetrics.Tier.PEER : QueryMetrics.Tier.SSD;
        this.lease = lease;
        this.stagingBytes = stagingBytes;
    }

    static PageSlot resident(int groupId, long page, Lease lease) {
        return new PageSlot(groupId, page, lease.key(), false, State.RESIDENT, lease, 0);
    }

    static PageSlot toStage(int groupId, long page, StateKey key, long stagingBytes, boolean remote) {
        return new PageSlot(groupId, page, key, remote, State.QUEUED, null, stagingBytes);
    }

    /** Releases the lease if one is held; true if this call released it. */
    boolean releaseLease() {
        if (lease == null) return false;
        lease.release();
        lease = null;
        return true;
    }

    /** Its staging landed with {@code lease} from {@code source}: RESIDENT, counted under that source's tier. */
    void staged(Lease lease, StageResult.Source source) {
        this.lease = lease;
        this.state = State.RESIDENT;
        this.tier = switch (source) {
            case DRAM_HIT -> QueryMetrics.Tier.DRAM;
            case SSD_READ, SHARED_READ -> QueryMetrics.Tier.SSD;
            case PEER_READ -> QueryMetrics.Tier.PEER;
        };
    }

    /** Its QUERY_RESULT entry, packed (no object per page: a 1,024-page hit is answered per QUERY). */
    void appendTo(PageEntries.Builder out) {
        switch (state) {
            case RESIDENT -> {
                SlotRef ref = lease.slotRef();
                out.resident(ref.classIndex(), ref.offsetBytes(), ref.lengthBytes());
            }
            case QUEUED, STAGING -> out.unleased(PageState.RESERVED);
            case FAILED, ABANDONED -> out.unleased(PageState.MISS);
            case READY -> out.unleased(PageState.READY);
        }
    }
}
