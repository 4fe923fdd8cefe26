package io.orbitkv.engine;

import io.orbitkv.state.StateKey;

import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * What an engine session runner (Jlama, llama.cpp) needs from OrbitKV: lease the longest restorable prefix, and
 * publish newly computed pages. The Manager-backed implementation speaks the engine channel
 * protocol; {@link #cold()} is the control that never touches OrbitKV.
 *
 * <p>Thread model: an instance is used by one runner thread at a time. Implementations bound
 * their own tables (the Manager's lease and reservation budgets reach the runner as a smaller
 * {@link PublishReport} or a {@link PrefixLookup.Miss}, never as a hang).
 */
public interface KvPageStore extends AutoCloseable {

    /**
     * Leases the longest legal prefix of {@code pageKeys} (page {@code i} covers tokens
     * {@code [i*P, (i+1)*P)}) for a prompt of {@code promptTokens}. The caller passed only pages
     * that leave at least one prompt token to compute.
     */
    PrefixLookup lookupPrefix(List<StateKey> pageKeys, long promptTokens);

    /**
     * Publishes one image per key: reserves slots of {@code imageBytes}, asks {@code writer} to
     * fill each granted slot, then commits. Keys the store already holds are not written.
     */
    PublishReport publish(List<StateKey> pageKeys, long imageBytes, PageImageWriter writer);

    /**
     * The runner computed {@code tokens} prompt tokens in {@code nanos} (one prefill). A store may
     * use the measured rate (the Manager-backed one sends it in QUERY so the Manager can prefer a
     * shorter DRAM prefix over a slow restore); the default ignores it.
     */
    default void prefillObserved(long tokens, long nanos) {
    }

    @Override
    void close();

    /** Fills the slot of page {@code index} (an index into the published key list). */
    @FunctionalInterface
    interface PageImageWriter {
        void write(int index, MemorySegment slot);
    }

    /**
     * Outcome counts of one publish.
     *
     * @param sealed          pages committed and visible to queries
     * @param alreadyPresent  pages the store already had (or another publisher sealed first)
     * @param refused         pages refused for space or budget, not written
     */
    record PublishReport(int sealed, int alreadyPresent, int refused) {
        public static final PublishReport NONE = new PublishReport(0, 0, 0);

        public PublishReport {
            if (sealed < 0 || alreadyPresent < 0 || refused < 0) throw new IllegalArgumentException("negative count");
        }

        public PublishReport plus(PublishReport other) {
            return new PublishReport(sealed + other.sealed, alreadyPresent + other.alreadyPresent, refused + other.refused);
        }
    }

    /** The cold control: every lookup misses, nothing is published. */
    static KvPageStore cold() {
        return ColdStore.INSTANCE;
    }

    /** {@link #cold()}'s implementation; stateless. */
    enum ColdStore implements KvPageStore {
        INSTANCE;

        @Override
        public PrefixLookup lookupPrefix(List<StateKey> pageKeys, long promptTokens) {
            return new PrefixLookup.Miss("cold control: no OrbitKV");
        }

        @Override
        public PublishReport publish(List<StateKey> pageKeys, long imageBytes, PageImageWriter writer) {
            return PublishReport.NONE;
        }

        @Override
        public void close() {
        }
    }
}
