package io.orbitkv.core.namespace;

import io.orbitkv.state.NamespaceDigest;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * The Manager's tenants: small indexes for the configured {@link TenantQuotas}, and the rule that
 * maps a publish (namespace id, optional label) to one of them. Index {@value #UNTRACKED} is every
 * page no quota names (unlimited, not counted per tenant); index {@code i + 1} is the
 * {@code i}-th configured quota.
 *
 * <p>Resolution: a label a quota of the namespace names is that tenant; otherwise (no label, or a
 * label no quota names) the namespace's default tenant when one is configured; otherwise
 * {@value #UNTRACKED}. Labels never create tenants, so a client cannot grow the table.
 *
 * <p>Thread model: immutable after construction apart from the {@link NamespaceTable} it reads
 * (thread-safe), so every method is thread-safe and lock-free.
 *
 * <p>Design note: keyed by digest rather than by the Manager's namespace id, because ids are bound
 * when an engine registers (or a recovered extent is served), after the configuration is read;
 * one id-to-digest lookup per resolution is a hash-map read.
 */
public final class TenantTable {

    /** The index of pages no quota names. */
    public static final int UNTRACKED = 0;

    private final List<TenantQuota> quotas;
    private final NamespaceTable namespaces;
    /** Per namespace digest: label ("" for the default tenant) to tenant index. */
    private final Map<NamespaceDigest, Map<String, Integer>> byNamespace = new HashMap<>();

    public TenantTable(TenantQuotas quotas, NamespaceTable namespaces) {
        this.quotas = Objects.requireNonNull(quotas, "quotas").tenants();
        this.namespaces = Objects.requireNonNull(namespaces, "namespaces");
        for (int i = 0; i < this.quotas.size(); i++) {
            TenantQuota q = this.quotas.get(i);
            byNamespace.computeIfAbsent(q.namespace(), d -> new HashMap<>()).put(q.labelText(), i + 1);
        }
    }

    /** A table with no quotas: everything resolves to {@value #UNTRACKED}. */
    public static TenantTable none() {
        return new TenantTable(TenantQuotas.NONE, new NamespaceTable(1));
    }

    /** Tenant indexes in use, {@value #UNTRACKED} included: configured quotas + 1. */
    public int size() {
        return quotas.size() + 1;
    }

    /** True when at least one quota is configured. */
    public boolean tracksAny() {
        return !quotas.isEmpty();
    }

    /** The tenant a publish of {@code namespaceId} with {@code label} (null: none) is charged to. */
    public int resolve(int namespaceId, String label) {
        if (quotas.isEmpty()) return UNTRACKED;
        Optional<NamespaceDigest> digest = namespaces.digest(namespaceId);
        return digest.isEmpty() ? UNTRACKED : resolve(digest.get(), label);
    }

    /** As {@link #resolve(int, String)} for a namespace named by digest. */
    public int resolve(NamespaceDigest namespace, String label) {
        Map<String, Integer> labels = byNamespace.get(namespace);
        if (labels == null) return UNTRACKED;
        Integer tenant = label == null ? null : labels.get(label);
        if (tenant == null) tenant = labels.get("");
        return tenant == null ? UNTRACKED : tenant;
    }

    /** The quota of tenant {@code tenant} (1..size()-1). */
    public TenantQuota quota(int tenant) {
        if (tenant == UNTRACKED) throw new IllegalArgumentException("the untracked tenant has no quota");
        return quotas.get(tenant - 1);
    }

    /** DRAM cap of {@code tenant}; {@link TenantQuota#UNLIMITED} for {@value #UNTRACKED}. */
    public long dramBytes(int tenant) {
        return tenant == UNTRACKED ? TenantQuota.UNLIMITED : quota(tenant).dramBytes();
    }

    /** SSD cap of {@code tenant}; {@link TenantQuota#UNLIMITED} for {@value #UNTRACKED}. */
    public long ssdBytes(int tenant) {
        return tenant == UNTRACKED ? TenantQuota.UNLIMITED : quota(tenant).ssdBytes();
    }

    /** DRAM guarantee of {@code tenant}; 0 for {@value #UNTRACKED}. */
    public long dramGuaranteedBytes(int tenant) {
        return tenant == UNTRACKED ? 0 : quota(tenant).dramGuaranteedBytes();
    }
}
