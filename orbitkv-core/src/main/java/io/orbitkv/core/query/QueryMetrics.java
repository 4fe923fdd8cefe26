package io.orbitkv.core.query;

import io.orbitkv.state.StateKey;

import java.util.List;

/**
 * Where a {@link QueryOperation} counts what it did: first PENDING answers, settled queries,
 * restores and peer waits. Implemented by the Manager's meters ({@code ManagerMetrics}); the
 * records and enums here are the labels and the evidence those meters take.
 *
 * <p>Thread model: the operation calls every method with its session's lock held; an
 * implementation is shared by every session of a Manager, so it must be thread-safe.
 *
 * <p>Design note: the sink travels in {@link QueryServices}, not through the session callback,
 * because counting is the Manager's business and not one connection's: a session forwarding each
 * call would add a hop and nothing else.
 */
public interface QueryMetrics {

    /** Counts a first PENDING answer. */
    void countPending();

    /** Counts a settled query: once per operation revision, when it becomes FINAL. */
    void countSettled(SettledQuery settled);

    /**
     * Counts a RESTORE when its last copy task ended: bytes copied into engine regions by the
     * tier each page came from, and the time from RESTORE accepted to that end.
     */
    void countRestore(RestoreOutcome outcome, TierCounts bytesCopied, long durationNanos);

    /** Counts a QUERY's peer wait when it ends. */
    void countPeerWait(PeerWaitOutcome outcome);

    /** Times one phase of a peer wait ({@link PeerWaitPhase}), when it ends. */
    void timePeerWaitPhase(PeerWaitPhase phase, long durationNanos);

    /** Where a page of a hit came from ({@code tier} label: {@code dram}, {@code ssd}, {@code peer}). */
    enum Tier {
        /** Resident in this Manager's DRAM when the query was planned. */
        DRAM,
        /** Staged from this Manager's SSD store (its own read or one it shared). */
        SSD,
        /** Fetched from a peer Manager into a local DRAM slot. */
        PEER
    }

    /** How a RESTORE ended ({@code outcome} label of {@code orbitkv_restore_duration_seconds}). */
    enum RestoreOutcome { OK, FAILED, CANCELLED }

    /** A count per {@link Tier}; non-negative. */
    record TierCounts(long dram, long ssd, long peer) {
        public static final TierCounts ZERO = new TierCounts(0, 0, 0);

        public TierCounts {
            if (dram < 0 || ssd < 0 || peer < 0) throw new IllegalArgumentException("negative count");
        }

        /** Counts indexed by {@link Tier#ordinal()}. */
        public static TierCounts of(long[] byTier) {
            return new TierCounts(byTier[Tier.DRAM.ordinal()], byTier[Tier.SSD.ordinal()], byTier[Tier.PEER.ordinal()]);
        }

        public long get(Tier tier) {
            return switch (tier) {
                case DRAM -> dram;
                case SSD -> ssd;
                case PEER -> peer;
            };
        }

        public TierCounts plus(Tier tier, long n) {
            return switch (tier) {
                case DRAM -> new TierCounts(dram + n, ssd, peer);
                case SSD -> new TierCounts(dram, ssd + n, peer);
                case PEER -> new TierCounts(dram, ssd, peer + n);
            };
        }

        public long total() {
            return dram + ssd + peer;
        }

        /**
         * Splits {@code amount} over the tiers in proportion to these counts (floors), the
         * remainder going to the largest count (DRAM first on ties), so the parts add up to
         * {@code amount} exactly; all of it to DRAM when every count is 0. Used to attribute a
         * hit's tokens to tiers by its pages (page counts and token counts stay far below
         * 2^31, so the products cannot overflow).
         */
        public TierCounts split(long amount) {
            long total = total();
            if (total == 0) return new TierCounts(amount, 0, 0);
            long d = Math.multiplyExact(amount, dram) / total;
            long s = Math.multiplyExact(amount, ssd) / total;
            long p = Math.multiplyExact(amount, peer) / total;
            long rest = amount - d - s - p;
            if (dram >= ssd && dram >= peer) d += rest;
            else if (ssd >= peer) s += rest;
            else p += rest;
            return new TierCounts(d, s, p);
        }
    }

    /**
     * A settled QUERY (one revision): the tokens it asked about ({@code prompt - origin}), the
     * tokens its hit covers ({@code boundary - origin}, 0 for a miss), the hit's pages and payload
     * bytes by the tier each page came from, and the time from QUERY arrival to FINAL.
     */
    record SettledQuery(boolean hit, long queriedTokens, long hitTokens, TierCounts pages, TierCounts bytes,
                        long durationNanos, List<StateKey> leasedKeys) {
        public SettledQuery {
            leasedKeys = List.copyOf(leasedKeys);
            if (queriedTokens < 0 || hitTokens < 0 || hitTokens > queriedTokens || durationNanos < 0) {
                throw new IllegalArgumentException("queried " + queriedTokens + ", hit " + hitTokens
                        + ", duration " + durationNanos);
            }
            java.util.Objects.requireNonNull(pages, "pages");
            java.util.Objects.requireNonNull(bytes, "bytes");
        }
    }

    /** How a peer wait ended ({@code orbitkv.manager.peer.waits}, tag {@code outcome}). */
    enum PeerWaitOutcome {
        /** Settled before the bound: the lookup answered and every fetch landed (hit or not). */
        SETTLED,
        /** The bound passed first: settled with what local tiers held. */
        EXPIRED,
        /** Cancelled, released or replaced before it settled. */
        STOPPED
    }

    /**
     * The phases of a peer wait that settled ({@code orbitkv.manager.peer.wait.phase}, tag
     * {@code phase}): where a first-query peer hit's time goes, as an operator sees it.
     */
    enum PeerWaitPhase {
        /** QUERY arrival to the catalog's answer (the lookup of the missing pages). */
        DISCOVERY,
        /** The catalog's answer (or the arrival, when cached candidates needed no lookup) to the settled answer: the fetches. */
        FETCH
    }

    /** How a query answer is counted ({@code orbitkv_manager_queries_total}, label {@code outcome}). */
    enum QueryOutcome { HIT, MISS, PENDING }
}
