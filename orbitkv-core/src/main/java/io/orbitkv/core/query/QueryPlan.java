package io.orbitkv.core.query;

import io.orbitkv.core.storage.TieredStore;
import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.Requirement;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.protocol.PageEntries;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * What {@link QueryPlanner#plan} found: a selected legal boundary with exactly its required
 * pages (each leased in DRAM or to be staged from SSD), or no legal boundary.
 */
sealed interface QueryPlan {

    /**
     * What a settled answer with this plan selected is counted as: the tokens asked about
     * ({@code prompt - origin}), the tokens a hit covers and its leased pages and bytes by tier.
     */
    QueryMetrics.SettledQuery settled(Request.Query query, long durationNanos);

    /** One contiguous run of required pages of one group. */
    record SlotSpan(int groupId, long firstPage, PageSlot[] pages) {
        public SlotSpan {
            Objects.requireNonNull(pages, "pages");
            if (pages.length == 0) throw new IllegalArgumentException("empty span");
        }
    }

    /**
     * The largest legal boundary; {@code spans} are exactly {@code required}, in contract order.
     * The plan's holder owns every lease in it.
     */
    record Hit(long boundaryTokens, List<Requirement> required, List<SlotSpan> spans) implements QueryPlan {
        public Hit {
            required = List.copyOf(required);
            spans = List.copyOf(spans);
        }

        long stagingBytes() {
            long n = 0;
            for (SlotSpan s : spans) for (PageSlot p : s.pages()) n += p.stagingBytes;
            return n;
        }

        int pageCount() {
            int n = 0;
            for (SlotSpan s : spans) n += s.pages().length;
            return n;
        }

        /**
         * Keys of the leased pages whose images no settled hit marked needed before
         * ({@link Lease#markNeeded}, which this marks): what the retention ledger has not counted
         * yet. A prefix hit again and again probes the ledger once per image, not once per page
         * per hit.
         */
        List<StateKey> firstNeeded() {
            List<StateKey> out = new ArrayList<>();
            for (SlotSpan s : spans) {
                for (PageSlot p : s.pages()) {
                    if (p.lease != null && p.lease.markNeeded()) out.add(p.key);
                }
            }
            return out;
        }

        /** Leases held now on the plan's pages. */
        int leasesHeld() {
            int n = 0;
            for (SlotSpan s : spans) for (PageSlot p : s.pages()) if (p.lease != null) n++;
            return n;
        }

        /** Whether a page's staging failed or was given up (the boundary must be selected again). */
        boolean anyFailed() {
            for (SlotSpan s : spans) {
                for (PageSlot p : s.pages()) {
                    if (p.state == PageSlot.State.FAILED || p.state == PageSlot.State.ABANDONED) return true;
                }
            }
            return false;
        }

        /** Releases every lease of the plan (the plan is not taken). */
        void releaseAll() {
            for (SlotSpan s : spans) for (PageSlot p : s.pages()) p.releaseLease();
        }

        /** Releases every lease held in bulk ({@link TieredStore#releaseLeases}: a lock trip per run, not per page). */
        int releaseLeases(TieredStore store) {
            int held = leasesHeld();
            if (held == 0) return 0;
            Lease[] leases = new Lease[held];
            int n = 0;
            for (SlotSpan s : spans) {
                for (PageSlot p : s.pages()) {
                    if (p.lease != null) {
                        leases[n++] = p.lease;
                        p.lease = null;
                    }
                }
            }
            store.releaseLeases(leases, n);
            return n;
        }

        /** The QUERY_RESULT groups: one per contract group, in contract order, with its spans' entries. */
        List<Reply.GroupResult> groups(RecoveryContract contract) {
            List<Reply.GroupResult> groups = new ArrayList<>(contract.groups().size());
            for (StateGroup g : contract.groups()) {
                List<Reply.Span> out = new ArrayList<>(2);
                for (SlotSpan s : spans) {
                    if (s.groupId() != g.id()) continue;
                    PageEntries.Builder pages = PageEntries.builder(s.pages().length);
                    for (PageSlot p : s.pages()) p.appendTo(pages);
                    out.add(new Reply.Span(s.firstPage(), pages.build()));
                }
                groups.add(new Reply.GroupResult(g.id(), out));
            }
            return groups;
        }

        @Override
        public QueryMetrics.SettledQuery settled(Request.Query query, long durationNanos) {
            // Per-tier sums in locals and a presized key array: a settled 1,024-page hit is counted on
            // every QUERY, and a record per page plus list growth was a sixth of the Manager's QUERY
            // time in a bench-manager profile.
            long[] pages = new long[QueryMetrics.Tier.values().length];
            long[] bytes = new long[pages.length];
            StateKey[] leased = new StateKey[leasesHeld()];
            int n = 0;
            for (SlotSpan s : spans) {
                for (PageSlot p : s.pages()) {
                    if (p.lease == null) continue;
                    leased[n++] = p.key;
                    pages[p.tier.ordinal()]++;
                    bytes[p.tier.ordinal()] += p.lease.lengthBytes();
                }
            }
            long queried = Math.max(0, query.promptTokens() - query.originTokens());
            long hitTokens = Math.min(queried, Math.max(0, boundaryTokens - query.originTokens()));
            return new QueryMetrics.SettledQuery(true, queried, hitTokens, QueryMetrics.TierCounts.of(pages),
                    QueryMetrics.TierCounts.of(bytes), durationNanos, Arrays.asList(leased));
        }
    }

    /** No legal boundary above the origin; holds nothing. {@code groups} are informational. */
    record Miss(List<Reply.GroupResult> groups) implements QueryPlan {
        public Miss {
            groups = List.copyOf(groups);
        }

        @Override
        public QueryMetrics.SettledQuery settled(Request.Query query, long durationNanos) {
            return new QueryMetrics.SettledQuery(false, Math.max(0, query.promptTokens() - query.originTokens()), 0,
                    QueryMetrics.TierCounts.ZERO, QueryMetrics.TierCounts.ZERO, durationNanos, List.of());
        }
    }
}
