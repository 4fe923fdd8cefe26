package io.orbitkv.state;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * A brute-force model of the recovery semantics, written from the spec page by page and token by
 * token (no ranges, no binary search), for the properties to compare {@link RecoveryContract}
 * against. Small inputs only.
 *
 * @param pageTokens  P
 * @param groups      the contract's groups
 * @param pages       per page-group id: the set of available page indices
 * @param checkpoints per recurrent group id: the set of checkpoint token positions
 */
record RecoveryModel(int pageTokens, List<StateGroup> groups, Map<Integer, Set<Long>> pages,
                     Map<Integer, Set<Long>> checkpoints) {

    RecoveryContract contract() {
        return new RecoveryContract(pageTokens, groups);
    }

    Coverage coverage() {
        Map<Integer, GroupCoverage> m = new TreeMap<>();
        pages.forEach((id, set) -> m.put(id, GroupCoverage.pages(toRanges(set))));
        checkpoints.forEach((id, set) -> m.put(id, GroupCoverage.checkpoints(set.stream().mapToLong(Long::longValue).toArray())));
        return Coverage.of(m);
    }

    /** The pages group {@code g} needs at {@code t}, one by one. */
    Set<Long> neededPages(StateGroup g, long t, long origin) {
        Set<Long> need = new TreeSet<>();
        long o = origin / pageTokens;
        long k = t / pageTokens;
        switch (g) {
            case StateGroup.Full f -> {
                for (long p = o; p < k; p++) need.add(p);
            }
            case StateGroup.SlidingWindow w -> {
                long startToken = Math.max(origin, t - w.windowTokens());
                for (long p = Math.floorDiv(startToken, pageTokens); p < k; p++) need.add(p);
                for (long s = 0; s < w.sinkTokens(); s++) {
                    long p = s / pageTokens;
                    if (p >= o && p < k) need.add(p);
                }
            }
            case StateGroup.Recurrent r -> {
            }
        }
        return need;
    }

    boolean recoverable(StateGroup g, long t, long origin) {
        return switch (g) {
            case StateGroup.Recurrent r -> checkpoints.getOrDefault(r.id(), Set.of()).contains(t);
            case StateGroup.Full f -> pages.getOrDefault(f.id(), Set.of()).containsAll(neededPages(g, t, origin));
            case StateGroup.SlidingWindow w -> pages.getOrDefault(w.id(), Set.of()).containsAll(neededPages(g, t, origin));
        };
    }

    boolean legal(long t, long promptTokens, long origin) {
        long cap = (promptTokens - 1) / pageTokens * pageTokens;
        if (t % pageTokens != 0 || t <= origin || t > cap) return false;
        for (StateGroup g : groups) {
            if (!recoverable(g, t, origin)) return false;
        }
        return true;
    }

    /** The largest legal boundary, or -1. */
    long best(long promptTokens, long origin) {
        long best = -1;
        for (long t = 0; t < promptTokens; t++) {
            if (legal(t, promptTokens, origin)) best = t;
        }
        return best;
    }

    static List<PageRange> toRanges(Set<Long> set) {
        List<PageRange> out = new ArrayList<>();
        for (long p : set) out.add(new PageRange(p, p + 1));
        return out;
    }
}
