package io.orbitkv.core.namespace;

import io.orbitkv.state.NamespaceDigest;

import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;

/**
 * The configured tenant budgets of a Manager ({@link TenantQuota}, one per namespace and label);
 * everything they do not name is unlimited. Immutable; validated on construction.
 *
 * <p>Design note: budgets are configured, never created by traffic, so the tenant table, its
 * per-slot bookkeeping and its metric series are bounded by this list ({@value #MAX_TENANTS}
 * entries), whatever labels clients send.
 *
 * @param tenants the budgets, at most one per (namespace, label)
 */
public record TenantQuotas(List<TenantQuota> tenants) {

    /** Most configured tenants. */
    public static final int MAX_TENANTS = 1024;

    /** No budgets: every namespace and label is unlimited. */
    public static final TenantQuotas NONE = new TenantQuotas(List.of());

    public TenantQuotas {
        tenants = List.copyOf(Objects.requireNonNull(tenants, "tenants"));
        if (tenants.size() > MAX_TENANTS) {
            throw new IllegalArgumentException("at most " + MAX_TENANTS + " tenant quotas, got " + tenants.size());
        }
        Set<Object> seen = new HashSet<>();
        for (TenantQuota t : tenants) {
            if (!seen.add(List.of(t.namespace(), t.label()))) {
                throw new IllegalArgumentException("two quotas for namespace " + t.namespace() + " tenant '"
                        + t.labelText() + "'");
            }
        }
    }

    /** True when no budget is configured. */
    public boolean isEmpty() {
        return tenants.isEmpty();
    }

    /** Sum of the configured DRAM guarantees, in bytes. */
    public long dramGuaranteedBytes() {
        return tenants.stream().mapToLong(TenantQuota::dramGuaranteedBytes).sum();
    }

    /** The quota for {@code namespace} and {@code label} (empty label: the default tenant), if configured. */
    public Optional<TenantQuota> find(NamespaceDigest namespace, Optional<String> label) {
        return tenants.stream().filter(t -> t.namespace().equals(namespace) && t.label().equals(label)).findFirst();
    }
}
