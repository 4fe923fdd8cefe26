package io.orbitkv.core.storage.dram;

/**
 * One configured tenant's DRAM figures at one moment ({@link DramTier#tenantUsage}; a row of
 * {@code /status}'s {@code tenants}).
 *
 * @param namespace       the tenant's namespace digest in hex
 * @param tenant          its tenant label; empty for the namespace's default tenant
 * @param usedBytes       slot bytes charged to it now (reserved and resident images)
 * @param limitBytes      its DRAM cap; -1 when it has none
 * @param guaranteedBytes its DRAM guarantee
 * @param selfEvictions   images its own DRAM cap evicted so far
 * @param refusals        reservations its DRAM cap refused so far (NO_SPACE on the wire)
 */
public record TenantDramUsage(String namespace, String tenant, long usedBytes, long limitBytes, long guaranteedBytes,
                              long selfEvictions, long refusals) {
}
