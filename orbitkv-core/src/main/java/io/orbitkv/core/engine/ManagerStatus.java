package io.orbitkv.core.engine;

import io.orbitkv.core.query.PrepareAccounting;
import io.orbitkv.core.query.QueryMetrics.TierCounts;
import io.orbitkv.core.storage.dram.DramUsage;

import java.util.List;
import java.util.Objects;

/**
 * A snapshot of the Manager for {@code /status}: tier usage, engine instances with their
 * epochs, and the bounded tables with their budgets. Values; immutable. Each table count is read
 * atomically but the snapshot as a whole is not (tables move while it is taken).
 *
 * @param dram               DRAM tier byte accounting
 * @param ssdUsedBytes       bytes of the SSD store's extents in use
 * @param ssdCapacityBytes   the SSD store's capacity
 * @param ssdInflightStages  keys being staged from SSD now
 * @param instances          known engine instances (highest epoch each)
 * @param sessions           open connections
 * @param maxSessions        {@code maxConnections}
 * @param operations         live or draining query operations, over all sessions
 * @param leases             entries of the global lease table in use (leased or being staged pages)
 * @param maxLeases          the lease table's bound
 * @param reservations       open publish reservations, over all sessions
 * @param regions            registered destination regions, over all sessions
 * @param stagingBytes       bytes being staged from SSD for queries
 * @param stagingBudgetBytes the staging budget
 * @param restoreTasks       restore copy tasks queued or running
 * @param queries            query answers by outcome
 * @param pagesLeased        pages leased by settled hits, total
 * @param restoreBytes       bytes copied into engine regions, total
 * @param busyRejections     BUSY answers of every table, total
 * @param shuttingDown       true once {@link ManagerCore#close()} began
 * @param prefixCache        prefix-cache tokens and bytes by tier, totals since start
 */
public record ManagerStatus(DramUsage dram, long ssdUsedBytes, long ssdCapacityBytes, int ssdInflightStages, List<InstanceStatus> instances, int sessions,
                            int maxSessions, long operations, long leases, long maxLeases, long reservations,
                            long regions, long stagingBytes, long stagingBudgetBytes, int restoreTasks,
                            QueryCounts queries, long pagesLeased, long restoreBytes, long busyRejections,
                            boolean shuttingDown, PrefixCache prefixCache) {

    public ManagerStatus {
        Objects.requireNonNull(dram, "dram");
        Objects.requireNonNull(prefixCache, "prefixCache");
        instances = List.copyOf(instances);
        Objects.requireNonNull(queries, "queries");
    }

    /** One engine instance: its highest registered epoch and whether that incarnation is connected. */
    public record InstanceStatus(String instanceId, long epoch, long incarnationId, boolean connected) {
        public InstanceStatus {
            Objects.requireNonNull(instanceId, "instanceId");
        }
    }

    /**
     * Prefix-cache totals since start, the same figures as the {@code orbitkv_prefix_cache_*} and
     * {@code orbitkv_restore_bytes_total} series: tokens settled queries asked about, hit tokens,
     * hit bytes and RESTORE-copied bytes by the tier the pages came from.
     */
    public record PrefixCache(long queriedTokens, TierCounts hitTokens, TierCounts hitBytes, TierCounts restoredBytes) {
        public PrefixCache {
            Objects.requireNonNull(hitTokens, "hitTokens");
            Objects.requireNonNull(hitBytes, "hitBytes");
            Objects.requireNonNull(restoredBytes, "restoredBytes");
        }
    }

    /**
     * {@code /status}'s {@code prepare}: live prepares, pages held for them, the speculation budget
     * (used and capacity, in flight and held) and, per namespace, what preparation bought (pages
     * prepared by route, consumed, released unused, expired, byte-seconds held, trimmed, refused).
     */
    public record Preparation(int prepares, int heldPages, long inFlightBytes, long inFlightBudgetBytes, long heldBytes,
                              long heldBudgetBytes, long busyRefusals, List<PrepareAccounting.Counts> namespaces) {
        public Preparation {
            namespaces = List.copyOf(namespaces);
        }
    }

    /** Query answers: FINAL hits, FINAL misses, and first answers that were PENDING. */
    public record QueryCounts(long hits, long misses, long pending) {
    }
}
