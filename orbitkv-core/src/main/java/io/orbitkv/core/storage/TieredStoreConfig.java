package io.orbitkv.core.storage;

import io.orbitkv.core.storage.dram.DramTierConfig;
import io.orbitkv.core.storage.publish.PublishConfig;
import io.orbitkv.core.storage.ssd.SsdConfig;

import java.util.Objects;

/**
 * Configuration of a {@link TieredStore}: its two tiers, the publish pipeline, and the
 * facade's own bounds. Immutable; validated on construction.
 *
 * @param dram              the DRAM tier
 * @param ssd               the SSD store; its {@code ioThreads} is also the dispatcher's in-flight bound
 * @param publish           seal queue, SSD admission policy and budget, dispatcher lanes
 * @param residencyEvents   bound of the shared residency stream's ring, in events
 * @param maxInflightStages distinct keys being staged from SSD at once; one more is Busy
 */
public record TieredStoreConfig(DramTierConfig dram, SsdConfig ssd, PublishConfig publish, int residencyEvents,
                                int maxInflightStages) {

    public TieredStoreConfig {
        Objects.requireNonNull(dram, "dram");
        Objects.requireNonNull(ssd, "ssd");
        Objects.requireNonNull(publish, "publish");
        if (residencyEvents <= 0) throw new IllegalArgumentException("residencyEvents must be positive");
        if (maxInflightStages <= 0) throw new IllegalArgumentException("maxInflightStages must be positive");
        if (ssd.maxPayloadBytes() < dram.sizeClasses().getLast().slotBytes()) {
            throw new IllegalArgumentException("SSD maxPayloadBytes " + ssd.maxPayloadBytes()
                    + " cannot hold the largest DRAM slot " + dram.sizeClasses().getLast().slotBytes());
        }
    }
}
