package io.orbitkv.core.cost;

import java.util.Objects;

/**
 * The physical resource a path runs on, with its incarnation, so that measurements of an old
 * store (or a restarted peer) are never applied to a new one with the same name.
 *
 * @param name        stable owner name, e.g. {@code ssd:/var/lib/orbitkv/ssd0} or {@code dram:main}
 * @param incarnation value that changes whenever the owner is reopened (never a request id or
 *                    a per-replica generation)
 */
public record ResourceId(String name, long incarnation) {
    public ResourceId {
        Objects.requireNonNull(name, "name");
        if (name.isEmpty()) throw new IllegalArgumentException("resource name is empty");
    }
}
