package io.orbitkv.core.engine;

import io.orbitkv.core.storage.dram.ChainLink;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.protocol.Request;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * What one engine session knows of its prefix chains, for a chain-aware DRAM policy: per group,
 * where the prefix its latest QUERY matched ends, and from that and a PUBLISH_RESERVE's page order
 * each page's {@link ChainLink}. A group's pages in one RESERVE are consecutive prefix pages, so a
 * page's parent is the group's page before it, and the group's first page hangs under the end of
 * the matched prefix.
 *
 * <p>Thread model: confined to its session's lock, like the session's other state.
 *
 * <p>Invariant: at most one matched end per contract group.
 */
final class PublishChains {

    private final Map<Integer, StateKey> lastMatched = new HashMap<>();

    /** The session's latest QUERY matched, per group, a prefix ending at these pages (empty: a miss). */
    void matched(Map<Integer, StateKey> lastPages) {
        lastMatched.clear();
        lastMatched.putAll(lastPages);
    }

    /** Each page's link, for a RESERVE of {@code pages} whose keys are {@code keys}. O(pages). */
    ChainLink[] links(List<Request.PublishPage> pages, StateKey[] keys) {
        int n = pages.size();
        int[] previous = new int[n];
        boolean[] followed = new boolean[n];
        Map<Integer, Integer> lastOfGroup = new HashMap<>();
        for (int i = 0; i < n; i++) {
            Integer before = lastOfGroup.put(pages.get(i).groupId(), i);
            previous[i] = before == null ? -1 : before;
            if (before != null) followed[before] = true;
        }
        ChainLink[] links = new ChainLink[n];
        for (int i = 0; i < n; i++) {
            StateKey parent = previous[i] >= 0 ? keys[previous[i]] : lastMatched.get(pages.get(i).groupId());
            links[i] = new ChainLink(parent, previous[i] < 0, !followed[i]);
        }
        return links;
    }
}
