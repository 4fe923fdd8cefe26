package io.orbitkv.core.storage;

import io.orbitkv.core.namespace.NamespaceTable;
import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.state.StateKey;

import java.util.Objects;

/** Outcome of {@link TieredStore#stage}: a DRAM lease on the key's image, a miss, or busy. */
public sealed interface StageResult {

    /** How a staged lease was obtained. */
    enum Source {
        /** The image was already in DRAM. */
        DRAM_HIT,
        /** This call read it from SSD into DRAM. */
        SSD_READ,
        /** Another staging of the same key was reading it; this call shared that read. */
        SHARED_READ,
        /** Neither local tier had it; a peer Manager sent it into a local DRAM slot (io.orbitkv.core.peer). */
        PEER_READ
    }

    /** Why a staging found nothing servable. */
    enum MissReason {
        /** No SSD extent is indexed for the key. */
        NOT_FOUND,
        /** The extent failed verification (header, identity or CRC); it was dropped, nothing served. */
        CORRUPT,
        /** The extent's namespace digest is not registered in the {@link NamespaceTable}. */
        UNKNOWN_NAMESPACE,
        /** The image was staged but evicted before this caller could lease it. */
        EVICTED,
        /** The read failed with an I/O error. */
        IO_ERROR,
        /** The store is closing. */
        CLOSED
    }

    /** Why a staging was refused for now; retrying later may succeed. */
    enum BusyReason {
        /** {@code maxInflightStages} distinct keys are being staged and {@code maxQueuedStages} more wait. */
        INFLIGHT_TABLE_FULL,
        /** The dispatcher's read lane is full. */
        READ_LANE_FULL,
        /** No DRAM slot could be reserved for the image. */
        DRAM_FULL,
        /** The SSD store's own queue refused the read. */
        SSD_QUEUE_FULL
    }

    /** The caller owns {@code lease} and must release it. */
    record Staged(Lease lease, Source source) implements StageResult {
        public Staged {
            Objects.requireNonNull(lease, "lease");
            Objects.requireNonNull(source, "source");
        }
    }

    record Miss(StateKey key, MissReason reason) implements StageResult {
        public Miss {
            Objects.requireNonNull(key, "key");
            Objects.requireNonNull(reason, "reason");
        }
    }

    record Busy(BusyReason reason) implements StageResult {
        public Busy {
            Objects.requireNonNull(reason, "reason");
        }
    }
}
