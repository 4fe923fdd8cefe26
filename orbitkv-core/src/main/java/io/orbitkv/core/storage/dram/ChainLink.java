package io.orbitkv.core.storage.dram;

import io.orbitkv.state.StateKey;

/**
 * Where a published page sits in its prefix chain, as its publisher knows it: the key of the page
 * before it ({@code parent}, null when none is known), and whether it is the {@code first} or the
 * {@code last} page of one publish run (a run's first page hangs under the end of the prefix the
 * engine's query matched; its later pages under the page before them). Set on a
 * {@link Reservation} with {@link Reservation#chain}; read by the tier at commit, used only by a
 * policy that {@linkplain EvictionPolicy#tracksChains tracks chains}. A wrong link costs cache
 * quality, never correctness: it can only keep one page until its supposed successor leaves.
 */
public record ChainLink(StateKey parent, boolean first, boolean last) {

    /** No known parent, not part of a publish run (restores, peer fetches, sealed blocks). */
    public static final ChainLink NONE = new ChainLink(null, false, false);
}
