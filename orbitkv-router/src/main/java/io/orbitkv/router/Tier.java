package io.orbitkv.router;

import java.util.Optional;

/**
 * Where a worker's host holds a block, as KV events name it ({@code medium} of vLLM's
 * {@code BlockStored}/{@code BlockRemoved}; docs/kv-events.md).
 *
 * <p>{@link #HBM} is the engine's own device memory (vLLM's {@code "GPU"}, also what an event
 * without a medium means: vLLM's engine publishes its GPU blocks with no medium in older
 * releases); it is local only, a peer cannot read it. {@link #DRAM} (the Manager's {@code "CPU"})
 * and {@link #SSD} are readable by the worker itself and, through the peer read path, by other
 * hosts.
 */
public enum Tier {
    HBM, DRAM, SSD;

    /** The tier of an event's {@code medium}; empty for a medium this router does not know. */
    public static Optional<Tier> ofMedium(String medium) {
        if (medium == null) return Optional.of(HBM);
        return switch (medium) {
            case "GPU" -> Optional.of(HBM);
            case "CPU" -> Optional.of(DRAM);
            case "SSD" -> Optional.of(SSD);
            default -> Optional.empty();
        };
    }
}
