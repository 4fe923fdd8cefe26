package io.orbitkv.core.query;

import io.orbitkv.state.Requirement;
import io.orbitkv.state.protocol.Reply;

import java.util.List;
import java.util.Objects;

/**
 * What {@link QueryPlanner#plan} found: a selected legal boundary with exactly its required
 * pages (each leased in DRAM or to be staged from SSD), or no legal boundary.
 */
sealed interface QueryPlan {

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

        /** Releases every lease of the plan (the plan is not taken). */
        void releaseAll() {
            for (SlotSpan s : spans) for (PageSlot p : s.pages()) p.releaseLease();
        }
    }

    /** No legal boundary above the origin; holds nothing. {@code groups} are informational. */
    record Miss(List<Reply.GroupResult> groups) implements QueryPlan {
        public Miss {
            groups = List.copyOf(groups);
        }
    }
}
