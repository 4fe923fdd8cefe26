package io.orbitkv.bench.serve;

import io.orbitkv.engine.HitSource;
import io.orbitkv.engine.KvPageStore;
import io.orbitkv.engine.PrefixLookup;
import io.orbitkv.state.StateKey;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The engine-local prefix cache of the serving benchmark's middle arm: what a user of one
 * llama.cpp server gets from its prompt cache instead of an external one. Keeps the KV state of
 * the engine's last sequences (each a saved sequence state carved into its prompt pages) in the
 * engine's own memory, bounded in bytes, and restores the longest matching prefix of any of them.
 *
 * <p>Owns its entries' off-heap memory (one confined arena per entry, closed on eviction and on
 * {@link #close()}). Thread model: confined to the engine's thread, like the runner that uses it.
 * Invariants: the bytes of all entries never exceed {@code capacityBytes}; an entry is never freed
 * while a {@link PrefixLookup.Hit} on it is open ({@link #pinned()} counts those, and eviction
 * skips a pinned entry); an entry's pages are the sequence's pages {@code [0, n)}, in order.
 *
 * <p>Design note: sequence-granular like llama.cpp's server prompt cache (a cache of whole saved
 * states, least recently used out first), not page-granular: two sequences that share a system
 * prompt each hold their own copy of it, which is what an engine's own KV memory costs and what a
 * shared, deduplicating store (OrbitKV) saves. The match is in whole pages of the project's
 * token chain (16 tokens), where llama.cpp's server matches tokens: at most one page less reuse.
 * A new sequence that extends the entry it was restored from replaces it (the server's slot keeps
 * its latest prompt). The runner publishes only pages it computed; the pages it restored come
 * from the entry of the last hit, still held because nothing is evicted between the lookup and
 * the publish of one request. Lookup compares keys from page 0 against every entry: work
 * proportional to the entries present, at most {@code capacityBytes / pageBytes} pages.
 */
final class EngineLocalPageStore implements KvPageStore {

    private final long capacityBytes;
    /** Access order: the first entry is the least recently used. */
    private final LinkedHashMap<Long, Entry> entries = new LinkedHashMap<>(16, 0.75f, true);
    private long usedBytes;
    private long nextId;
    private int pinned;
    /** The entry and page count of the last hit, for the publish that follows it; null after a miss. */
    private Entry lastHit;
    private int lastHitPages;
    private long hits;
    private long evictions;

    private static final class Entry {
        final long id;
        final List<StateKey> keys;
        final List<MemorySegment> pages;
        final Arena arena;
        final long bytes;
        int pins;

        Entry(long id, List<StateKey> keys, List<MemorySegment> pages, Arena arena, long bytes) {
            this.id = id;
            this.keys = keys;
            this.pages = pages;
            this.arena = arena;
            this.bytes = bytes;
        }
    }

    EngineLocalPageStore(long capacityBytes) {
        if (capacityBytes < 0) throw new IllegalArgumentException("capacity must be >= 0: " + capacityBytes);
        this.capacityBytes = capacityBytes;
    }

    @Override
    public PrefixLookup lookupPrefix(List<StateKey> pageKeys, long promptTokens) {
        Entry best = null;
        int bestPages = 0;
        for (Entry e : entries.values()) {
            int n = Math.min(e.keys.size(), pageKeys.size());
            int match = 0;
            while (match < n && e.keys.get(match).equals(pageKeys.get(match))) match++;
            if (match > bestPages) {
                best = e;
                bestPages = match;
            }
        }
        lastHit = null;
        lastHitPages = 0;
        if (best == null) return new PrefixLookup.Miss("no cached sequence shares page 0");
        entries.get(best.id); // touch: most recently used
        Entry hit = best;
        hit.pins++;
        pinned++;
        hits++;
        lastHit = hit;
        lastHitPages = bestPages;
        boolean[] released = new boolean[1];
        return new PrefixLookup.Hit(hit.pages.subList(0, bestPages), HitSource.DRAM, () -> {
            if (released[0]) return;
            released[0] = true;
            hit.pins--;
            pinned--;
            if (hit.pins == 0 && !entries.containsKey(hit.id)) hit.arena.close();
        });
    }

    /**
     * Stores the sequence these keys complete as one entry: the pages of the last hit it was
     * restored from (when the keys continue it) followed by the published pages.
     */
    @Override
    public PublishReport publish(List<StateKey> pageKeys, long imageBytes, PageImageWriter writer) {
        if (pageKeys.isEmpty()) return PublishReport.NONE;
        Entry base = lastHit != null && entries.containsKey(lastHit.id) ? lastHit : null;
        int prefixPages = base == null ? 0 : lastHitPages;
        lastHit = null;
        long bytes = (prefixPages + pageKeys.size()) * imageBytes;
        if (bytes > capacityBytes) return new PublishReport(0, 0, pageKeys.size());
        Arena arena = Arena.ofConfined();
        List<StateKey> keys = new ArrayList<>(prefixPages + pageKeys.size());
        List<MemorySegment> pages = new ArrayList<>(prefixPages + pageKeys.size());
        MemorySegment block = arena.allocate(bytes, 64);
        for (int i = 0; i < prefixPages; i++) {
            MemorySegment slot = block.asSlice(i * imageBytes, imageBytes);
            slot.copyFrom(base.pages.get(i));
            keys.add(base.keys.get(i));
            pages.add(slot);
        }
        for (int i = 0; i < pageKeys.size(); i++) {
            MemorySegment slot = block.asSlice((prefixPages + i) * imageBytes, imageBytes);
            writer.write(i, slot);
            keys.add(pageKeys.get(i));
            pages.add(slot);
        }
        // the new sequence extends the entry it was restored from: it replaces it
        if (base != null && prefixPages == base.keys.size()) remove(base);
        while (usedBytes + bytes > capacityBytes && evictOne()) {
            evictions++;
        }
        if (usedBytes + bytes > capacityBytes) {
            arena.close();
            return new PublishReport(0, 0, pageKeys.size());
        }
        Entry e = new Entry(nextId++, List.copyOf(keys), List.copyOf(pages), arena, bytes);
        entries.put(e.id, e);
        usedBytes += bytes;
        return new PublishReport(pageKeys.size(), 0, 0);
    }

    /** Evicts the least recently used unpinned entry; false when every entry is pinned (or none is left). */
    private boolean evictOne() {
        for (Iterator<Map.Entry<Long, Entry>> it = entries.entrySet().iterator(); it.hasNext(); ) {
            Entry e = it.next().getValue();
            if (e.pins > 0) continue;
            it.remove();
            usedBytes -= e.bytes;
            e.arena.close();
            return true;
        }
        return false;
    }

    private void remove(Entry e) {
        entries.remove(e.id);
        usedBytes -= e.bytes;
        if (e.pins == 0) e.arena.close();
    }

    /** Open hits (the engine-local counterpart of the Manager's leases). */
    int pinned() {
        return pinned;
    }

    int entries() {
        return entries.size();
    }

    long usedBytes() {
        return usedBytes;
    }

    long hits() {
        return hits;
    }

    long evictions() {
        return evictions;
    }

    /** Frees every entry; a hit still open keeps its entry until it closes. */
    @Override
    public void close() {
        for (Entry e : List.copyOf(entries.values())) remove(e);
    }
}
