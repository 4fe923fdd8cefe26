package io.orbitkv.engine;

import io.orbitkv.state.StateKey;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.List;
import java.util.Map;

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
     * Leases the state at the longest legal boundary of the contract the store registered:
     * {@code keysByGroup} names, per group id, entry {@code i} = the page of tokens
     * {@code [i*P, (i+1)*P)} (attention groups) or the checkpoint taken at token {@code (i+1)*P}
     * (recurrent groups). The store answers a {@link StateLookup.Hit} only with every group's
     * complete requirement at one boundary. The default, for stores that keep no group-aware state,
     * misses.
     */
    default StateLookup lookupBoundary(Map<Integer, List<StateKey>> keysByGroup, long promptTokens) {
        return new StateLookup.Miss("this store keeps no recovery-contract state");
    }

    /**
     * Publishes one image per key of group {@code groupId} (a recurrent group's key {@code i} names
     * the checkpoint at token {@code (i+1)*P}); otherwise as {@link #publish(List, long, PageImageWriter)}.
     * The default refuses every image.
     */
    default PublishReport publish(int groupId, List<StateKey> keys, long imageBytes, PageImageWriter writer) {
        return new PublishReport(0, 0, keys.size());
    }

    /**
     * A lookup of {@code pageKeys} for a prompt of {@code promptTokens} is expected in about
     * {@code firstUseMillis} ms (the request is queued): the store may stage the pages it does
     * not hold close to the engine meanwhile (the Manager-backed one sends PREPARE, protocol
     * §5.11), so that the later {@link #lookupPrefix} is a DRAM hit. Nothing is leased; returns
     * whether the store took it. The default takes nothing.
     */
    default boolean prepare(List<StateKey> pageKeys, long promptTokens, int firstUseMillis) {
        return false;
    }

    /**
     * The runner computed {@code tokens} prompt tokens in {@code nanos} (one prefill). A store may
     * use the measured rate (the Manager-backed one sends it in QUERY so the Manager can prefer a
     * shorter DRAM prefix over a slow restore); the default ignores it.
     */
    default void prefillObserved(long tokens, long nanos) {
    }

    /**
     * Waits at most {@code timeout} until every page an earlier {@link #publish} queued has been
     * published, refused or dropped; returns whether it has. A store that publishes synchronously
     * (the default) has nothing queued and returns true at once.
     */
    default boolean awaitPublished(Duration timeout) throws InterruptedException {
        return true;
    }

    @Override
    void close();

    /** Fills the slot of page {@code index} (an index into the published key list). */
    @FunctionalInterface
    interface PageImageWriter {
        void write(int index, MemorySegment slot);
    }

    /**
     * Outcome counts of one publish. A store that publishes in the background knows only that the
     * pages were queued when it returns: their outcome reaches its cumulative counters later
     * ({@link OrbitKvPageStore#publishStats()}), and {@link #awaitPublished} waits for it.
     *
     * @param sealed          pages committed and visible to queries
     * @param alreadyPresent  pages the store already had (or another publisher sealed first)
     * @param refused         pages refused for space or budget, not written (a full background queue included)
     * @param queued          pages copied and queued for a background publish, outcome not known yet
     */
    record PublishReport(int sealed, int alreadyPresent, int refused, int queued) {
        public static final PublishReport NONE = new PublishReport(0, 0, 0, 0);

        public PublishReport {
            if (sealed < 0 || alreadyPresent < 0 || refused < 0 || queued < 0) throw new IllegalArgumentException("negative count");
        }

        /** The report of a synchronous publish: every page's outcome is known. */
        public PublishReport(int sealed, int alreadyPresent, int refused) {
            this(sealed, alreadyPresent, refused, 0);
        }

        /** {@code pages} pages queued for a background publish. */
        public static PublishReport queued(int pages) {
            return new PublishReport(0, 0, 0, pages);
        }

        public PublishReport plus(PublishReport other) {
            return new PublishReport(sealed + other.sealed, alreadyPresent + other.alreadyPresent, refused + other.refused,
                    queued + other.queued);
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
        public StateLookup lookupBoundary(Map<Integer, List<StateKey>> keysByGroup, long promptTokens) {
            return new StateLookup.Miss("cold control: no OrbitKV");
        }

        @Override
        public PublishReport publish(int groupId, List<StateKey> keys, long imageBytes, PageImageWriter writer) {
            return PublishReport.NONE;
        }

        @Override
        public void close() {
        }
    }
}
