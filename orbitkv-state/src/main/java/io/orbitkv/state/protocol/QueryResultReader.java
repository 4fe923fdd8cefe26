package io.orbitkv.state.protocol;

import java.util.ArrayList;
import java.util.List;

/**
 * Reads a QUERY_RESULT body, the one frame with three nested variable-length levels (groups,
 * spans, pages). Stateless; called by {@link FrameDecoder} only.
 */
final class QueryResultReader {

    /** Smallest page entry: the state byte alone. */
    private static final int MIN_PAGE_BYTES = 1;

    /** Page states by wire code; null where no state has the code. */
    private static final PageState[] STATES = statesByCode();

    private QueryResultReader() {
    }

    static Reply.QueryResult read(WireReader r, ProtocolLimits limits) {
        long op = r.u63("operation_id");
        int revision = r.u31("revision");
        QueryStatus status = FrameDecoder.code(QueryStatus.class, r.u8("status"), "status");
        boolean hit = r.flag("hit");
        int groupCount = r.checkCount("group_count", r.u16("group_count"), limits.maxGroupsPerQuery(),
                "maxGroupsPerQuery", 8);
        long boundary = r.u63("boundary_tokens");
        List<Reply.GroupResult> groups = new ArrayList<>(groupCount);
        long pages = 0;
        for (int g = 0; g < groupCount; g++) {
            int groupId = r.u31("group_id");
            int spanCount = r.checkCount("span_count", r.u16("span_count"), Reply.MAX_SPANS_PER_GROUP,
                    "MAX_SPANS_PER_GROUP", 12);
            r.zero16("pad");
            List<Reply.Span> spans = new ArrayList<>(spanCount);
            for (int s = 0; s < spanCount; s++) {
                long first = r.u63("first_page");
                long count = r.u31("page_count");
                pages += count;
                r.checkCount("pages of the result", pages, limits.maxPagesPerQuery(), "maxPagesPerQuery", 0);
                int n = r.checkCount("page_count", count, Integer.MAX_VALUE, "", MIN_PAGE_BYTES);
                PageEntries.Builder entries = PageEntries.builder(n); // refuses 0: a span has a page
                for (int p = 0; p < n; p++) readPage(r, entries);
                spans.add(new Reply.Span(first, entries.build()));
            }
            groups.add(new Reply.GroupResult(groupId, spans));
        }
        return new Reply.QueryResult(op, revision, status, hit, boundary, groups);
    }

    private static PageState[] statesByCode() {
        int max = 0;
        for (PageState s : PageState.values()) max = Math.max(max, s.code());
        PageState[] out = new PageState[max + 1];
        for (PageState s : PageState.values()) out[s.code()] = s;
        return out;
    }

    /** One page entry into {@code out}, packed: no object per page (see {@link PageEntries}). */
    private static void readPage(WireReader r, PageEntries.Builder out) {
        int code = r.u8("state");
        // A table by code, not WireCode.lookup: that scan (ClassValue and all constants) was half
        // of a client's time decoding a 1,024-page result in a bench-manager profile.
        PageState state = code < STATES.length ? STATES[code] : null;
        if (state == null) throw WireReader.malformed("unknown state " + code);
        if (state != PageState.RESIDENT) {
            out.unleased(state);
            return;
        }
        int arena = r.u31("arena_index");
        long offset = r.u63("offset_bytes");
        out.resident(arena, offset, r.u31("length_bytes"));
    }
}
