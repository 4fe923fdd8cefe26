package io.orbitkv.server.events;

import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.state.StateKey;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;

/**
 * The engine's name of each key this Manager was asked to store: which instance published it
 * (the event topic), the engine's block hash and the page's size in tokens. Learned when a publish
 * slot is granted ({@link KvEventPublisher#onReserved}), consulted when a residency event for the
 * key is turned into a KV event.
 *
 * <p>Owns a bounded table of at most {@code capacity} names, least recently used first out.
 * Thread-safe: session threads {@link #learn}, the publisher thread {@link #lookup}s; every call
 * takes the one monitor briefly (a hash map operation). A name outlives the key's residency until
 * it is pushed out: an SSD commit may follow the DRAM eviction of the same page, and a name
 * removed at the eviction would leave that commit unnamed.
 */
final class BlockNames {

    /** The engine's name of a key. */
    record Name(String topic, byte[] blockHash, int blockSize) {
    }

    private final int capacity;
    // @GuardedBy("this")
    private final LinkedHashMap<StateKey, Name> names;
    // @GuardedBy("this")
    private long pushedOut;

    BlockNames(int capacity) {
        if (capacity < 1) throw new IllegalArgumentException("capacity must be >= 1: " + capacity);
        this.capacity = capacity;
        this.names = new LinkedHashMap<>(16, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<StateKey, Name> eldest) {
                if (size() <= BlockNames.this.capacity) return false;
                pushedOut++;
                return true;
            }
        };
    }

    synchronized void learn(StateKey key, Name name) {
        names.put(key, name);
    }

    /** The name of the key of {@code event}, empty when it was never learned or was pushed out. */
    synchronized Optional<Name> lookup(ResidencyEvent event) {
        return Optional.ofNullable(names.get(event.key()));
    }

    synchronized int size() {
        return names.size();
    }

    /** Names dropped to keep the bound, since start. */
    synchronized long pushedOut() {
        return pushedOut;
    }

    int capacity() {
        return capacity;
    }
}
