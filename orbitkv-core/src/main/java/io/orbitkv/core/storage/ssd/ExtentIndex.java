package io.orbitkv.core.storage.ssd;

import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;

import java.util.List;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The {@link SsdStore}'s in-memory index: (namespace digest, key) → newest indexed {@link Extent}, the sum of the
 * indexed footprints, and the residency events that announce every change.
 *
 * <p>Thread model: thread-safe; callers are the store's callers (pin, delete), its I/O workers
 * (a written extent, a claimed or corrupt one) and either read route (a corrupt extent).
 *
 * <p>Invariants: an entry is an extent whose header and payload were written (or verified at
 * recovery) and not yet claimed by the ring, deleted or found corrupt; each insertion is followed
 * by exactly one ADDED event ({@link ResidencyEvent.Medium#SSD}, generation = extent generation)
 * and each removal by exactly one REMOVED event (removals use {@code remove(key, extent)}, so two
 * removers cannot both win); a newer generation of a key is never replaced by an older one;
 * {@link #usedBytes} is the sum of the indexed footprints.
 *
 * <p>Design note: a {@link ConcurrentHashMap} of about 56-byte {@link Extent} entries plus ~40
 * bytes of node, ~100 MB for 1 M extents (64 GiB of 64 KiB pages); it is bounded by the ring (an
 * extent leaves the index before its bytes are reused). Removals are in memory only: keys are
 * content digests, so an extent that reappears after a restart is still a correct image of its
 * key, and re-verification at recovery keeps a corrupt one out. Keyed by (namespace, key), as
 * every extent header records both: the same key bytes in two namespaces are two extents that
 * never replace each other (a {@link Page} adds 24 bytes per extent).
 */
final class ExtentIndex {

    /** An extent's identity: its namespace and key. */
    record Page(NamespaceDigest namespace, StateKey key) {
        static Page of(Extent e) {
            return new Page(e.namespace, e.key);
        }
    }

    private final ConcurrentHashMap<Page, Extent> index = new ConcurrentHashMap<>();
    private final AtomicLong usedBytes = new AtomicLong();
    private final ResidencyStream residency;

    ExtentIndex(ResidencyStream residency) {
        this.residency = residency;
    }

    /** The extent indexed for {@code key} in {@code namespace} now, if any. */
    Optional<Extent> get(NamespaceDigest namespace, StateKey key) {
        return Optional.ofNullable(index.get(new Page(namespace, key)));
    }

    /** The extents of {@code key} in every namespace, a weakly consistent copy. Walks the whole index. */
    List<Extent> extentsOf(StateKey key) {
        return index.values().stream().filter(e -> e.key.equals(key)).toList();
    }

    /** Indexes an extent kept by recovery (one per namespace and key, the newest intact generation). */
    void recovered(Extent e) {
        index.put(Page.of(e), e);
        usedBytes.addAndGet(e.footprintBytes());
        added(e);
    }

    /** Indexes a written extent unless a newer generation of its key is already indexed. */
    void publish(Extent placed) {
        Extent[] replaced = new Extent[1];
        boolean[] won = new boolean[1];
        index.compute(Page.of(placed), (k, old) -> {
            if (old != null && old.generation > placed.generation) return old;
            replaced[0] = old;
            won[0] = true;
            return placed;
        });
        if (!won[0]) return;
        // The replaced generation's REMOVED goes first: a follower that applies events in order (the
        // catalog mirror, KV events) must end with the key present, not removed.
        if (replaced[0] != null) {
            usedBytes.addAndGet(-replaced[0].footprintBytes());
            removed(replaced[0]);
        }
        usedBytes.addAndGet(placed.footprintBytes());
        added(placed);
    }

    /** Removes exactly this extent; true (and one REMOVED event) only for the remover that won. */
    boolean remove(Extent e) {
        if (!index.remove(Page.of(e), e)) return false;
        usedBytes.addAndGet(-e.footprintBytes());
        removed(e);
        return true;
    }

    /** The keys indexed now, one per extent (a key in two namespaces twice), a weakly consistent copy. */
    List<StateKey> keys() {
        return index.keySet().stream().map(Page::key).toList();
    }

    /** The indexed extents, a weakly consistent copy. */
    List<Extent> extents() {
        return List.copyOf(index.values());
    }

    int size() {
        return index.size();
    }

    long usedBytes() {
        return usedBytes.get();
    }

    private void added(Extent e) {
        residency.append(e.key, ResidencyEvent.Medium.SSD, ResidencyEvent.Kind.ADDED, e.generation, e.payloadBytes);
        residency.retainedOnSsd(e.namespace, e.key, ResidencyEvent.Kind.ADDED, e.payloadBytes);
    }

    private void removed(Extent e) {
        residency.append(e.key, ResidencyEvent.Medium.SSD, ResidencyEvent.Kind.REMOVED, e.generation, e.payloadBytes);
        residency.retainedOnSsd(e.namespace, e.key, ResidencyEvent.Kind.REMOVED, e.payloadBytes);
    }
}
