package io.orbitkv.bench.trace;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Belady's MIN over block references, with bypass: knowing the whole trace, when a missing block
 * does not fit, evict the cached block whose next reference is farthest in the future, unless the
 * missing block's own next reference is farther still (then it is not admitted). This is the
 * optimal number of block hits for a cache of this capacity, and an upper reference no online
 * policy can reach. It is not exactly optimal for prefix hits (a cached block behind an evicted
 * one serves nothing), which is the standard way it is quoted for prefix caches.
 *
 * <p>Built from the request list it will be fed: the next-use position of every reference is
 * computed up front (one pass backwards), and {@link #access} must then see exactly those
 * requests in that order (checked: a request that differs fails).
 *
 * <p>Design note: next uses are unique reference positions, so a {@link TreeMap} from next use to
 * block gives the farthest in O(log n); a block never referenced again gets a position past the
 * end of the trace ({@code references + its own position}), so those go first, in any order.
 */
public final class BeladyPolicy implements CachePolicy {

    private final int capacityBlocks;
    private final List<TraceRequest> trace;
    /** For each reference (requests' chains concatenated), the position of the next reference of the same block. */
    private final long[] nextUse;
    private final Map<Long, Long> nextUseOfCached = new HashMap<>();
    private final TreeMap<Long, Long> cachedByNextUse = new TreeMap<>();
    private int nextRequest;
    private int position;

    public BeladyPolicy(int capacityBlocks, List<TraceRequest> trace) {
        this.capacityBlocks = CachePolicy.requireCapacity(capacityBlocks);
        this.trace = List.copyOf(trace);
        long references = 0;
        for (TraceRequest r : this.trace) references += r.blocks();
        if (references > Integer.MAX_VALUE - 8) throw new IllegalArgumentException("trace too long: " + references);
        nextUse = new long[(int) references];
        Map<Long, Long> seenAt = new HashMap<>();
        int p = (int) references;
        for (int q = this.trace.size() - 1; q >= 0; q--) {
            TraceRequest r = this.trace.get(q);
            for (int i = r.blocks() - 1; i >= 0; i--) {
                p--;
                Long later = seenAt.put(r.block(i), (long) p);
                nextUse[p] = later != null ? later : references + p;
            }
        }
    }

    @Override
    public String name() {
        return "Belady";
    }

    @Override
    public int capacityBlocks() {
        return capacityBlocks;
    }

    @Override
    public int size() {
        return nextUseOfCached.size();
    }

    @Override
    public int hitBlocks(TraceRequest r) {
        return CachePolicy.cachedPrefix(r, nextUseOfCached::containsKey);
    }

    @Override
    public void access(TraceRequest r) {
        if (nextRequest >= trace.size() || !trace.get(nextRequest).equals(r)) {
            throw new IllegalStateException("Belady was built for another sequence: request " + nextRequest
                    + " is not " + r);
        }
        nextRequest++;
        for (int i = 0; i < r.blocks(); i++) {
            long block = r.block(i);
            long next = nextUse[position++];
            Long previous = nextUseOfCached.get(block);
            if (previous != null) {
                cachedByNextUse.remove(previous);
            } else if (nextUseOfCached.size() >= capacityBlocks) {
                Map.Entry<Long, Long> farthest = cachedByNextUse.lastEntry();
                if (farthest.getKey() < next) continue; // bypass: this block is needed later than every cached one
                cachedByNextUse.pollLastEntry();
                nextUseOfCached.remove(farthest.getValue());
            }
            nextUseOfCached.put(block, next);
            cachedByNextUse.put(next, block);
        }
    }
}
