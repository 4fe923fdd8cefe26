package io.orbitkv.core.storage.dram;

/**
 * A client's hint about a resident image's value, for the DRAM {@link EvictionPolicy} (HINT
 * RETAIN and DEMOTE, protocol §5.12): worth more, or less, than its recency and frequency say.
 *
 * <p>Immutable.
 */
public enum ValueHint {
    /** Keep it longer: LRU moves it to the most recent end; W-TinyLFU counts a use. */
    RETAIN,
    /** Let it go first: LRU moves it to the eviction end; W-TinyLFU offers it first under class pressure. */
    DEMOTE
}
