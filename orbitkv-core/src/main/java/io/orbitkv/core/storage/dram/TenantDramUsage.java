package io.orbitkv.core.storage.dram;

import io.orbitkv.core.namespace.TenantQuota;

/**
 * One configured tenant's DRAM figures at one moment ({@link DramTier#tenantUsage}).
 *
 * @param quota         the tenant's configured budgets
 * @param usedBytes     slot bytes charged to it now (reserved and resident images)
 * @param selfEvictions images its own DRAM cap evicted so far
 * @param refusals      reservations its DRAM cap refused so far (NO_SPACE on the wire)
 */
public record TenantDramUsage(TenantQuota quota, long usedBytes, long selfEvictions, long refusals) {
}
