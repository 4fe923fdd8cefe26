package io.orbitkv.core.query;

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
 */
final class BlockKeyCache {

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
