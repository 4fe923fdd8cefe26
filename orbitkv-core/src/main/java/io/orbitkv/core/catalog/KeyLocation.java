package io.orbitkv.core.catalog;

import java.util.List;
import java.util.Objects;

/**
 * The catalog's answer for one key. {@link Absent} is only given when the shard owner has complete
 * coverage (every live source caught up, under the requester's own membership view); anything
 * less is {@link Unknown}, never a false absent.
 */
public sealed interface KeyLocation {

    /** At least one live node holds the key (evidence, see {@link Holder}). */
    record Present(List<Holder> holders) implements KeyLocation {
        public Present {
            holders = List.copyOf(holders);
            if (holders.isEmpty()) throw new IllegalArgumentException("Present needs a holder");
        }
    }

    /** No live node holds the key, with complete coverage. */
    record Absent() implements KeyLocation {
    }

    /** Coverage is incomplete: the key may or may not be held somewhere. */
    record Unknown(UnknownReason reason) implements KeyLocation {
        public Unknown {
            Objects.requireNonNull(reason, "reason");
        }
    }

    /** Why an answer is unknown (also the label of the unknown-count metric). */
    enum UnknownReason {
        /** This node's membership view is invalid: no remote work. */
        NO_MEMBERSHIP,
        /** A live source has not (re)sent its snapshot to the shard owner yet. */
        NOT_CAUGHT_UP,
        /** A source sent more keys than the shard owner keeps per source. */
        SOURCE_OVERFLOW,
        /** The shard owner sharded under other members than the requester. */
        VIEW_MISMATCH,
        /** The requester's placement version (membership view) is not the owner's: one of the two
         *  views is stale; the requester retries, re-routed by its view then. */
        STALE_PLACEMENT,
        /** A source is handing this owner the keys a membership change moved to it. */
        HANDOFF,
        /** Too many lookup calls were in flight on the requester (its fan-out bound). */
        LOOKUP_LIMIT,
        /** The shard owner could not be reached or failed the call. */
        UNREACHABLE,
        /** The shard owner did not answer before the batch's deadline. */
        TIMED_OUT
    }

    static KeyLocation unknown(UnknownReason reason) {
        return new Unknown(reason);
    }
}
