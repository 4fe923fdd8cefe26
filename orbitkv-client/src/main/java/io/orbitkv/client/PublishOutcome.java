package io.orbitkv.client;

/**
 * What became of one page handed to {@link OrbitKvClient#publish}: the RESERVED refusal or the
 * COMMITTED outcome of protocol.md sections 6.5 and 6.6, folded into one value per page.
 */
public enum PublishOutcome {
    /** Written into its slot and sealed: queries of the namespace may now hit it. */
    SEALED,
    /** Another publisher sealed the same key first; this copy was dropped (the key is cached). */
    DISCARDED,
    /** The key was already resident or being published: nothing was written. */
    ALREADY_RESIDENT,
    /** No slot of the needed size class could be freed; the page is not cached. */
    NO_SPACE,
    /** The connection's reservation table was full; retry later. */
    BUSY,
    /** The Manager no longer knew the reservation at commit (it was released); not cached. */
    NOT_FOUND
}
