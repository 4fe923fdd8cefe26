package io.orbitkv.core.namespace;

import io.orbitkv.state.NamespaceDigest;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The Manager's small namespace ids and the 32-byte digests they stand for: DRAM images carry
 * the id (4 bytes per image), SSD extent headers carry the digest (so a restart can prove which
 * namespace bytes belong to). The publish pipeline maps id → digest when it writes a block, and
 * staging maps digest → id when it brings a block back into DRAM. Ids are the Manager's own
 * choice, never a client's: an engine's REGISTER and a peer read of an SSD page recovered after a
 * restart ({@link #bind}) both take the digest's id, or the lowest free one.
 *
 * <p>Thread-safe (two concurrent maps kept in step under this object's lock for writes; reads
 * are lock-free). Invariant: the mapping is a bijection; an id or digest is registered at most
 * once and never changes. Bounded by {@code maxNamespaces}.
 *
 * <p>Design note: namespaces are few (one per model × layout × parallelism shape, typically
 * under 100), so two hash maps are cheaper than anything cleverer; the bound only stops a
 * misbehaving client from growing the table.
 */
public final class NamespaceTable {

    /** Outcome of {@link #register}. */
    public enum Registration { REGISTERED, ALREADY_REGISTERED, CONFLICT, FULL }

    private final int maxNamespaces;
    private final ConcurrentHashMap<Integer, NamespaceDigest> byId = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<NamespaceDigest, Integer> byDigest = new ConcurrentHashMap<>();

    public NamespaceTable(int maxNamespaces) {
        if (maxNamespaces <= 0) throw new IllegalArgumentException("maxNamespaces must be positive");
        this.maxNamespaces = maxNamespaces;
    }

    /** Binds {@code id} to {@code digest}; a different existing binding of either side is a conflict. */
    public synchronized Registration register(int id, NamespaceDigest digest) {
        NamespaceDigest existing = byId.get(id);
        Integer existingId = byDigest.get(digest);
        if (existing != null || existingId != null) {
            return digest.equals(existing) && existingId != null && existingId == id
                    ? Registration.ALREADY_REGISTERED : Registration.CONFLICT;
        }
        if (byId.size() >= maxNamespaces) return Registration.FULL;
        byId.put(id, digest);
        byDigest.put(digest, id);
        return Registration.REGISTERED;
    }

    /**
     * The id of {@code digest}, binding it to the lowest free id when it has none; empty when the
     * table is full. Callers bind only a digest they read from data they hold (an SSD extent's
     * header), so a peer cannot grow the table with digests of its choosing.
     */
    public synchronized OptionalInt bind(NamespaceDigest digest) {
        Integer known = byDigest.get(digest);
        if (known != null) return OptionalInt.of(known);
        if (byId.size() >= maxNamespaces) return OptionalInt.empty();
        int id = 0;
        while (byId.containsKey(id)) id++; // at most maxNamespaces probes
        byId.put(id, digest);
        byDigest.put(digest, id);
        return OptionalInt.of(id);
    }

    public Optional<NamespaceDigest> digest(int id) {
        return Optional.ofNullable(byId.get(id));
    }

    public OptionalInt id(NamespaceDigest digest) {
        Integer id = byDigest.get(digest);
        return id == null ? OptionalInt.empty() : OptionalInt.of(id);
    }
}
