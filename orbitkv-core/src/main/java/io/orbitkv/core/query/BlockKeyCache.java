package io.orbitkv.core.query;

import io.orbitkv.core.storage.dram.DramTier;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.StateKeys;
import io.orbitkv.state.protocol.Hashes;

import java.util.Arrays;

/**
 * Block-hash keys already derived ({@code StateKeys.forBlockHash}: one SHA-256 each), so a prefix
 * that is queried again costs a table probe per page instead of a hash. Owns a direct-mapped table
 * of {@link #ENTRIES} immutable entries; a colliding key simply replaces the older one.
 *
 * <p>Thread model: thread-safe without locks. Entries are immutable records published by a plain
 * array store: a reader sees either an older entry or a whole newer one (final-field semantics
 * cover the entry's hash array), and every hit is checked against the full (namespace id, group,
 * hash) it answers for, so a race can only cost a re-derivation, never a wrong key.
 *
 * <p>Invariants: an entry's key is {@code forBlockHash(digest of namespaceId, groupId, hash)}; the
 * namespace id ↔ digest map is one-to-one for the Manager's life ({@code NamespaceTable}), so a
 * client can only ever be answered keys of its own namespace.
 *
 * <p>Design note: a JFR profile of bench-manager put ~40 % of the Manager's CPU for a 1,024-page
 * QUERY in key derivation. 65,536 entries (about 120 B each with the key and hash arrays: ~8 MiB of
 * heap when full) cover 64 prompts of 1,024 pages; a direct-mapped table needs no eviction policy,
 * no lock and no allocation on a hit, where a Caffeine cache would add a map node and buffer writes
 * per page.
 *
 * <p>Prompt memo: an engine asks for the same prompt prefix again and again (each turn of a
 * conversation re-queries the whole history, each request the shared system prompt), and a table
 * probe per page is a cache miss per page (21 % of the Manager's thread for a 1,024-page QUERY in
 * an async-profiler run). {@link #prompt} remembers the key array of the last prompt per
 * (namespace, group, first page), {@link #PROMPTS} of them, and a new prompt takes the keys of the
 * pages it shares with that one from it after one vectorized compare of the packed hashes. Only
 * prompts of at most {@link #MEMO_MAX_PAGES} pages are remembered: a budget of about
 * {@code PROMPTS × MEMO_MAX_PAGES × 90 B} (hash bytes, key references and keys) ≈ 6 MiB of heap.
 * The arrays are shared between threads without locks: a slot holds null or a whole key
 * (StateKey's fields are final), so a race costs a derivation, never a wrong key.
 *
 * <p>A remembered prompt also keeps, per page, what the DRAM tier found for its key
 * ({@link PromptKeys#hint}: the resident image, opaque here), so a repeated prefix skips the
 * index probe per page as it skips the derivation; the tier checks each hint against the slot's
 * current image before it leases anything ({@code DramTier.acquireRun}). Same sharing rules: a
 * slot holds null or a whole immutable record, so a race costs a probe, never a wrong lease (the
 * record is one reference: its slot, id and length cannot come from different images). Budget:
 * a reference per page (4 B compressed), and the records stay reachable while their prompt is
 * remembered even once evicted: at most {@code PROMPTS × MEMO_MAX_PAGES} of 32 B, 2 MiB.
 */
final class BlockKeyCache {

    /** Prompts remembered (a power of two), one per (namespace, group, first page) slot. */
    static final int PROMPTS = 16;
    /** The longest prompt remembered, in pages. */
    static final int MEMO_MAX_PAGES = 4096;

    private record Prompt(int namespaceId, int groupId, Hashes hashes, StateKey[] keys, Object[] hints) {
    }

    private final Prompt[] prompts = new Prompt[PROMPTS];

    /**
     * The keys of {@code hashes} (one QUERY group's pages) derived on demand: pages it shares with
     * the last remembered prompt of the same namespace, group and first page come from that one's
     * keys, the others from {@link #key(SessionScope, int, Hashes, int)}. Remembers this prompt in
     * its place, unless it is the remembered prompt itself: then that one's arrays are used as
     * they are (a planning pass and the peer wait's scan of one QUERY share them, and a re-query
     * keeps every page's hint).
     */
    PromptKeys prompt(SessionScope scope, int groupId, Hashes hashes) {
        int count = hashes.count();
        if (count == 0 || count > MEMO_MAX_PAGES) {
            return new PromptKeys(scope, groupId, hashes, new StateKey[count], null, null, null, 0);
        }
        int slot = index(scope.namespaceId(), groupId, hashes.hashCodeAt(0)) & (PROMPTS - 1);
        Prompt last = prompts[slot];
        StateKey[] known = null;
        Object[] knownHints = null;
        int shared = 0;
        if (last != null && last.namespaceId() == scope.namespaceId() && last.groupId() == groupId) {
            shared = Math.min(hashes.commonPrefix(last.hashes()), last.keys().length);
            if (shared == count && last.keys().length == count) {
                // the same prompt again (an engine's re-query, or the same QUERY planned twice):
                // its keys and hints are this one's, kept in place rather than copied page by page
                return new PromptKeys(scope, groupId, hashes, last.keys(), null, last.hints(), null, 0);
            }
            known = last.keys();
            knownHints = last.hints();
        }
        StateKey[] keys = new StateKey[count];
        Object[] hints = new Object[count];
        prompts[slot] = new Prompt(scope.namespaceId(), groupId, hashes, keys, hints);
        return new PromptKeys(scope, groupId, hashes, keys, known, hints, knownHints, shared);
    }

    /** One QUERY group's page keys, derived once each; see {@link #prompt}. Thread-safe (see the header). */
    final class PromptKeys implements DramTier.RunKeys {
        private final SessionScope scope;
        private final int groupId;
        private final Hashes hashes;
        private final StateKey[] keys;
        private final StateKey[] known;
        private final Object[] hints;
        private final Object[] knownHints;
        private final int shared;

        private PromptKeys(SessionScope scope, int groupId, Hashes hashes, StateKey[] keys, StateKey[] known,
                           Object[] hints, Object[] knownHints, int shared) {
            this.scope = scope;
            this.groupId = groupId;
            this.hashes = hashes;
            this.keys = keys;
            this.known = known;
            this.hints = hints;
            this.knownHints = knownHints;
            this.shared = shared;
        }

        /**
         * What the DRAM tier found for page {@code index} ({@link DramTier.RunKeys#hint}):
         * this prompt's, else the remembered prompt's for a shared page; null when neither.
         */
        @Override
        public Object hint(int index) {
            if (hints == null) return null; // a prompt too long to remember keeps no hints either
            Object h = hints[index];
            if (h == null && index < shared) {
                h = knownHints[index];
                hints[index] = h; // carried forward: the next prompt remembers this one
            }
            return h;
        }

        /** Keeps the tier's {@code found} for page {@code index} (null: forget it, here and in the remembered prompt). */
        @Override
        public void remember(int index, Object found) {
            if (hints == null) return;
            hints[index] = found;
            if (found == null && index < shared) knownHints[index] = null;
        }

        /** The key of page {@code index}. */
        @Override
        public StateKey key(int index) {
            StateKey k = keys[index];
            if (k != null) return k;
            if (index < shared) k = known[index];
            if (k == null) k = BlockKeyCache.this.key(scope, groupId, hashes, index);
            keys[index] = k;
            return k;
        }
    }

    /** Table size, a power of two; a named budget of about 8 MiB of heap when every entry is set. */
    static final int ENTRIES = 1 << 16;

    private record Entry(int namespaceId, int groupId, byte[] hash, StateKey key) {
    }

    private final Entry[] table = new Entry[ENTRIES];

    /** The key of block hash {@code hash} of group {@code groupId} in the namespace of {@code scope}. */
    StateKey key(SessionScope scope, int groupId, byte[] hash) {
        int slot = index(scope.namespaceId(), groupId, Arrays.hashCode(hash));
        Entry e = table[slot];
        if (e != null && e.namespaceId() == scope.namespaceId() && e.groupId() == groupId
                && Arrays.equals(e.hash(), hash)) {
            return e.key();
        }
        StateKey key = StateKeys.forBlockHash(scope.digestBytesShared(), groupId, hash);
        table[slot] = new Entry(scope.namespaceId(), groupId, hash, key);
        return key;
    }

    /**
     * The key of block hash {@code index} of {@code hashes}, as {@link #key(SessionScope, int, byte[])};
     * a hit reads the hash in place, so only a miss copies it out of the packed QUERY group.
     */
    StateKey key(SessionScope scope, int groupId, Hashes hashes, int index) {
        int slot = index(scope.namespaceId(), groupId, hashes.hashCodeAt(index));
        Entry e = table[slot];
        if (e != null && e.namespaceId() == scope.namespaceId() && e.groupId() == groupId
                && hashes.equalsAt(index, e.hash())) {
            return e.key();
        }
        byte[] hash = hashes.get(index);
        StateKey key = StateKeys.forBlockHash(scope.digestBytesShared(), groupId, hash);
        table[slot] = new Entry(scope.namespaceId(), groupId, hash, key);
        return key;
    }

    private static int index(int namespaceId, int groupId, int hashCode) {
        int h = hashCode * 31 + groupId;
        h = h * 31 + namespaceId;
        h ^= h >>> 16;
        return h & (ENTRIES - 1);
    }
}
