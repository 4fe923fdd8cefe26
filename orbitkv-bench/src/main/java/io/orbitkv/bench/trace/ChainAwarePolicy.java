package io.orbitkv.bench.trace;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * A prefix cache that evicts leaf-first in the prefix tree, ranks leaves by a continuation
 * probability learned from the traffic, and admits a chain's partial last block only on its
 * second sighting. Compared with {@link LruPolicy} and {@link BeladyPolicy} in
 * docs/performance.md, "Cache quality: chain-aware eviction in the simulator".
 *
 * <p><b>Rule.</b> (1) A missing block is admitted only if its parent (the block before it in the
 * chain) is cached, or it is a chain's first block; so every cached block's parent is cached and
 * the cache is a forest of whole prefixes, never a tail behind a gap. (2) A chain's last block
 * (the prompt's partial tail, which the next turn of the session rewrites: on the conversation
 * trace 1 % of them are referenced again, against 25 % of the other new blocks) is admitted only
 * if it is in a ghost of the last {@code capacity} last blocks offered. (3) Only leaves (no
 * cached child) are evicted. Each leaf carries the turn class of the request that made it: a
 * request whose cached prefix ends at a leaf continues that chain (class + 1, capped at
 * {@value #CLASSES} - 1), any other starts at class 0. Per class the policy counts chain ends
 * made and chain ends continued (halved together every {@value #DECAY_ENDS} ends, so it follows
 * the traffic); a leaf's value is {@code p(class) / (references since its last use + 1)} with
 * {@code p = (continued + 1) / (ends + 2)}, and the victim is the least valuable of the classes'
 * least recent leaves (the least recent leaf of a class is its least valuable).
 *
 * <p><b>Derivation.</b> On the first half of the shipped trace a continuation's probability
 * rises with the turn (0.32 at turn 1 to 0.66 from turn 6 on), and leaf-first LRU alone gains
 * nothing over LRU without rule (2): the gains come from (2) and from keeping late turns longer.
 * A learned gap model (hazard of the next turn by idle time) and ghost-driven admission sampling
 * were tried and lost up to 0.07 of Belady at 25-50 % capacity, so they are not here.
 *
 * <p>Single-threaded. Memory per cached block, bounded: one map entry, one {@link Node} (id,
 * parent, class, child count, stamp), one leaf-order entry while a leaf, and one ghost slot per
 * block of capacity (about 200 bytes in this simulator's boxed collections; a port with int
 * indices needs id 8 + parent 4 + children 4 + stamp 8 + class 1 + ghost 8 = 33 bytes).
 */
public final class ChainAwarePolicy implements CachePolicy {

    /** Turn classes: chain ends made by a session's turn 1, 2, ..., and by turn {@value} or later. */
    static final int CLASSES = 8;
    /** Chain ends counted before every count is halved. */
    static final int DECAY_ENDS = 4096;

    private static final class Node {
        final long id;
        final Node parent;
        final int turnClass;
        int children;
        long stamp;

        Node(long id, Node parent, int turnClass) {
            this.id = id;
            this.parent = parent;
            this.turnClass = turnClass;
        }
    }

    private final int capacityBlocks;
    private final Map<Long, Node> nodes = new HashMap<>();
    /** Per turn class, the leaves by stamp (stamps are unique). */
    private final List<TreeMap<Long, Node>> leaves = new ArrayList<>(CLASSES);
    private final double[] ends = new double[CLASSES];
    private final double[] continued = new double[CLASSES];
    private final Ghost lastBlocks;
    private double endsCounted;
    private long clock;

    public ChainAwarePolicy(int capacityBlocks) {
        this.capacityBlocks = CachePolicy.requireCapacity(capacityBlocks);
        for (int c = 0; c < CLASSES; c++) leaves.add(new TreeMap<>());
        this.lastBlocks = new Ghost(capacityBlocks);
    }

    @Override
    public String name() {
        return "Chain-aware";
    }

    @Override
    public int capacityBlocks() {
        return capacityBlocks;
    }

    @Override
    public int size() {
        return nodes.size();
    }

    @Override
    public int hitBlocks(TraceRequest r) {
        return CachePolicy.cachedPrefix(r, nodes::containsKey);
    }

    @Override
    public void access(TraceRequest r) {
        int k = 0;
        Node parent = null;
        for (Node n; k < r.blocks() && (n = nodes.get(r.block(k))) != null; k++) parent = n;
        int turnClass = 0;
        if (parent != null && parent.children == 0 && k < r.blocks()) {
            continued[parent.turnClass]++;
            turnClass = Math.min(CLASSES - 1, parent.turnClass + 1);
        }
        for (int i = 0; i < k; i++) touch(nodes.get(r.block(i)));
        int last = r.blocks() - 1;
        boolean made = false;
        for (int i = k; i <= last; i++) {
            if (i == last && !lastBlocks.offer(r.block(i))) break;
            Node n = admit(r.block(i), parent, turnClass);
            if (n == null) break;
            parent = n;
            made = true;
        }
        if (made) countEnd(turnClass);
    }

    private void countEnd(int turnClass) {
        ends[turnClass]++;
        if (++endsCounted < DECAY_ENDS) return;
        for (int c = 0; c < CLASSES; c++) {
            ends[c] /= 2;
            continued[c] /= 2;
        }
        endsCounted /= 2;
    }

    private void touch(Node n) {
        if (n.children == 0) leaves.get(n.turnClass).remove(n.stamp);
        n.stamp = ++clock;
        if (n.children == 0) leaves.get(n.turnClass).put(n.stamp, n);
    }

    /** The least valuable of the classes' least recent leaves; null when nothing is cached. */
    private Node victim() {
        Node best = null;
        double bestValue = Double.MAX_VALUE;
        for (int c = 0; c < CLASSES; c++) {
            Map.Entry<Long, Node> oldest = leaves.get(c).firstEntry();
            if (oldest == null) continue;
            double value = (continued[c] + 1) / (ends[c] + 2) / (clock - oldest.getKey() + 1);
            if (value < bestValue) {
                bestValue = value;
                best = oldest.getValue();
            }
        }
        return best;
    }

    /** Caches {@code id} under {@code parent}, evicting a leaf if full; null when the only victim is {@code parent}. */
    private Node admit(long id, Node parent, int turnClass) {
        if (nodes.size() >= capacityBlocks) {
            Node v = victim();
            if (v == null || v == parent) return null;
            evict(v);
        }
        Node n = new Node(id, parent, turnClass);
        n.stamp = ++clock;
        nodes.put(id, n);
        leaves.get(turnClass).put(n.stamp, n);
        if (parent != null && parent.children++ == 0) leaves.get(parent.turnClass).remove(parent.stamp);
        return n;
    }

    private void evict(Node leaf) {
        leaves.get(leaf.turnClass).remove(leaf.stamp);
        nodes.remove(leaf.id);
        Node p = leaf.parent;
        if (p != null && --p.children == 0) leaves.get(p.turnClass).put(p.stamp, p);
    }

    /** The last {@code size} ids offered, first in first out: whether an id is among them. */
    private static final class Ghost {
        private final long[] ring;
        private final Map<Long, Integer> count = new HashMap<>();
        private int next;
        private int filled;

        Ghost(int size) {
            ring = new long[size];
            Arrays.fill(ring, -1);
        }

        /** Records {@code id}; whether it was offered before within the window. */
        boolean offer(long id) {
            boolean seen = count.containsKey(id);
            if (filled == ring.length) {
                count.computeIfPresent(ring[next], (k, c) -> c == 1 ? null : c - 1);
            } else {
                filled++;
            }
            ring[next] = id;
            next = (next + 1) % ring.length;
            count.merge(id, 1, Integer::sum);
            return seen;
        }
    }
}
