package io.orbitkv.core.namespace;

import io.orbitkv.state.NamespaceDigest;

import java.nio.charset.StandardCharsets;
import java.util.Objects;
import java.util.Optional;

/**
 * One tenant's byte budgets: a namespace, and within it either one tenant label (an engine's
 * {@code cache_salt}, sent in PUBLISH_RESERVE, docs/protocol.md 5.6) or the namespace's default
 * tenant (publishes with no label, or a label no entry names).
 *
 * <p>Immutable value; validated on construction.
 *
 * @param namespace           the namespace, by digest (the label {@code /metrics} and {@code /status} show)
 * @param label               the tenant label, 1..{@value #MAX_LABEL_BYTES} UTF-8 bytes; empty: the namespace's
 *                            default tenant
 * @param dramBytes           cap on the tenant's DRAM slot bytes (reserved and resident);
 *                            {@link #UNLIMITED} when none. Over it, the tenant evicts its own least
 *                            recently used images, and a publish that still does not fit is NO_SPACE
 * @param dramGuaranteedBytes DRAM slot bytes of this tenant that eviction on behalf of others never
 *                            takes (the tenant's own cap and explicit drops still may); at most
 *                            {@code dramBytes}
 * @param ssdBytes            cap on the tenant's SSD extent bytes (indexed and being written);
 *                            {@link #UNLIMITED} when none. A write that would pass it is not admitted
 *                            (the page stays in DRAM only)
 */
public record TenantQuota(NamespaceDigest namespace, Optional<String> label, long dramBytes, long dramGuaranteedBytes,
                          long ssdBytes) {

    /** A tenant with DRAM budgets and no SSD cap. */
    public TenantQuota(NamespaceDigest namespace, Optional<String> label, long dramBytes, long dramGuaranteedBytes) {
        this(namespace, label, dramBytes, dramGuaranteedBytes, UNLIMITED);
    }

    /** No cap. */
    public static final long UNLIMITED = Long.MAX_VALUE;

    /** Largest tenant label, in UTF-8 bytes (the protocol's bound, docs/protocol.md 5.6). */
    public static final int MAX_LABEL_BYTES = 64;

    public TenantQuota {
        Objects.requireNonNull(namespace, "namespace");
        Objects.requireNonNull(label, "label");
        label.ifPresent(TenantQuota::requireLabel);
        if (dramBytes <= 0) throw new IllegalArgumentException("a tenant's dramBytes must be positive: " + dramBytes);
        if (ssdBytes <= 0) throw new IllegalArgumentException("a tenant's ssdBytes must be positive: " + ssdBytes);
        if (dramGuaranteedBytes < 0 || dramGuaranteedBytes > dramBytes) {
            throw new IllegalArgumentException("a tenant's dramGuaranteedBytes must be in [0, dramBytes = " + dramBytes
                    + "]: " + dramGuaranteedBytes);
        }
    }

    /** Throws unless {@code label} is a tenant label: 1..{@value #MAX_LABEL_BYTES} UTF-8 bytes. */
    public static String requireLabel(String label) {
        int bytes = label.getBytes(StandardCharsets.UTF_8).length;
        if (bytes < 1 || bytes > MAX_LABEL_BYTES) {
            throw new IllegalArgumentException("a tenant label is 1.." + MAX_LABEL_BYTES + " UTF-8 bytes, got " + bytes);
        }
        return label;
    }

    /** The label shown in metrics and {@code /status}: the tenant label, or empty for the default tenant. */
    public String labelText() {
        return label.orElse("");
    }
}
