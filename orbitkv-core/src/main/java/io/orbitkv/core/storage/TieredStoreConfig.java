package io.orbitkv.core.storage;

import io.orbitkv.core.namespace.TenantQuotas;
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
 * @param maxInflightStages distinct keys being staged from SSD at once; one more waits in the staging queue
 * @param maxQueuedStages   stagings (distinct keys) waiting for one of the {@code maxInflightStages}; one more
 *                          is Busy ({@code INFLIGHT_TABLE_FULL})
 * @param tenants           per-tenant DRAM and SSD budgets ({@link TenantQuotas#NONE}: none)
 */
public record TieredStoreConfig(DramTierConfig dram, SsdConfig ssd, PublishConfig publish, int residencyEvents,
                                int maxInflightStages, int maxQueuedStages, TenantQuotas tenants) {

    /**
     * Default staging queue: 4,096 waiting keys, enough for 64 operations each with its full
     * {@code stagesPerOperation} (64) submitted at once; one waiting staging costs ~150 B of heap
     * (its key, its future and a queue node), 600 KiB when full.
     */
    public static final int DEFAULT_QUEUED_STAGES = 4096;

    /** As the canonical constructor with {@link #DEFAULT_QUEUED_STAGES}. */
    public TieredStoreConfig(DramTierConfig dram, SsdConfig ssd, PublishConfig publish, int residencyEvents,
                             int maxInflightStages) {
        this(dram, ssd, publish, residencyEvents, maxInflightStages, DEFAULT_QUEUED_STAGES);
    }

    /** As the canonical constructor with no tenant quotas. */
    public TieredStoreConfig(DramTierConfig dram, SsdConfig ssd, PublishConfig publish, int residencyEvents,
                             int maxInflightStages, int maxQueuedStages) {
        this(dram, ssd, publish, residencyEvents, maxInflightStages, maxQueuedStages, TenantQuotas.NONE);
    }

    /** This configuration with {@code tenants} as its tenant budgets. */
    public TieredStoreConfig withTenants(TenantQuotas tenants) {
        return new TieredStoreConfig(dram, ssd, publish, residencyEvents, maxInflightStages, maxQueuedStages, tenants);
    }

    public TieredStoreConfig {
        Objects.requireNonNull(dram, "dram");
        Objects.requireNonNull(ssd, "ssd");
        Objects.requireNonNull(publish, "publish");
        Objects.requireNonNull(tenants, "tenants");
        dram.requireGuaranteesFit(tenants.dramGuaranteedBytes());
        if (residencyEvents <= 0) throw new IllegalArgumentException("residencyEvents must be positive");
        if (maxInflightStages <= 0) throw new IllegalArgumentException("maxInflightStages must be positive");
        if (maxQueuedStages < 0) throw new IllegalArgumentException("maxQueuedStages must be >= 0");
        if (ssd.maxPayloadBytes() < dram.sizeClasses().getLast().slotBytes()) {
            throw new IllegalArgumentException("SSD maxPayloadBytes " + ssd.maxPayloadBytes()
                    + " cannot hold the largest DRAM slot " + dram.sizeClasses().getLast().slotBytes());
        }
    }
}
