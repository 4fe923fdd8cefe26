package io.orbitkv.engine;

/**
 * Where a restored prefix came from, as far as the protocol says.
 *
 * <p>The protocol names no medium per page. It says whether the first QUERY_RESULT was FINAL
 * (every leased page was already RESIDENT in Manager DRAM) or PENDING (some page was being
 * staged: from the SSD tier on a single Manager), so that is what a request reports.
 */
public enum HitSource {
    /** Nothing was restored. */
    NONE,
    /** The first QUERY_RESULT was a FINAL hit: the pages were resident in Manager DRAM. */
    DRAM,
    /** The first QUERY_RESULT was PENDING: pages were staged (read from SSD) before the hit. */
    STAGED
}
