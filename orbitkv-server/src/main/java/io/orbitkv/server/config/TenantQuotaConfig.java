package io.orbitkv.server.config;

import com.fasterxml.jackson.databind.JsonNode;
import io.orbitkv.core.namespace.TenantQuota;
import io.orbitkv.core.namespace.TenantQuotas;
import io.orbitkv.state.NamespaceDigest;

import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

/**
 * Reads the {@code tenantQuotas} key into {@link TenantQuotas} (DRAM and SSD budgets per tenant): a JSON array of objects, or the
 * same entries as text for {@code --set}.
 *
 * <pre>
 *   [{"namespace": "&lt;64 hex digits&gt;", "tenant": "salt-a", "dramBytes": "64m",
 *     "dramGuaranteedBytes": "16m", "ssdBytes": "1g"}, ...]
 *   &lt;64 hex&gt;[/&lt;tenant&gt;]:dramBytes=64m,dramGuaranteedBytes=16m,ssdBytes=1g;&lt;next entry&gt;
 * </pre>
 *
 * A namespace is named by its digest in hex, as {@code /metrics} ({@code namespace} label) and
 * {@code /status} ({@code retention}) show it; no {@code tenant} is the namespace's default tenant.
 * An omitted cap ({@code dramBytes}, {@code ssdBytes}) is unlimited, an omitted guarantee 0. In the text form a tenant label cannot
 * hold {@code ;} or {@code :}; the JSON form takes any label.
 *
 * <p>Stateless.
 */
final class TenantQuotaConfig {

    private static final String[] FIELDS = {"dramBytes", "dramGuaranteedBytes", "ssdBytes"};

    private TenantQuotaConfig() {
    }

    /** The quotas {@code v} describes; empty text or an empty array is none. */
    static TenantQuotas parse(JsonNode v) {
        List<TenantQuota> out = new ArrayList<>();
        if (v.isArray()) {
            for (JsonNode entry : v) out.add(entry(entry));
        } else if (v.isTextual()) {
            for (String entry : v.asText().split(";")) {
                if (!entry.isBlank()) out.add(entry(entry.strip()));
            }
        } else {
            throw new IllegalArgumentException("expected an array of tenant quotas or their text form, got " + v);
        }
        return new TenantQuotas(out);
    }

    private static TenantQuota entry(JsonNode e) {
        if (!e.isObject()) throw new IllegalArgumentException("a tenant quota is an object, got " + e);
        Map<String, String> sizes = new TreeMap<>();
        String namespace = null;
        Optional<String> tenant = Optional.empty();
        for (Map.Entry<String, JsonNode> f : e.properties()) {
            JsonNode value = f.getValue();
            switch (f.getKey()) {
                case "namespace" -> namespace = value.asText();
                case "tenant" -> tenant = Optional.of(value.asText());
                default -> sizes.put(f.getKey(), value.asText());
            }
        }
        if (namespace == null) throw new IllegalArgumentException("a tenant quota needs \"namespace\": " + e);
        return quota(namespace, tenant, sizes);
    }

    private static TenantQuota entry(String text) {
        int colon = text.lastIndexOf(':');
        String who = colon < 0 ? text : text.substring(0, colon);
        String what = colon < 0 ? "" : text.substring(colon + 1);
        int slash = who.indexOf('/');
        String namespace = slash < 0 ? who : who.substring(0, slash);
        Optional<String> tenant = slash < 0 ? Optional.empty() : Optional.of(who.substring(slash + 1));
        Map<String, String> sizes = new TreeMap<>();
        for (String part : what.split(",")) {
            if (part.isBlank()) continue;
            int eq = part.indexOf('=');
            if (eq < 0) throw new IllegalArgumentException("expected budget=size in tenant quota '" + text + "'");
            sizes.put(part.substring(0, eq).strip(), part.substring(eq + 1).strip());
        }
        return quota(namespace.strip(), tenant, sizes);
    }

    private static TenantQuota quota(String namespace, Optional<String> tenant, Map<String, String> sizes) {
        for (String name : sizes.keySet()) {
            if (!List.of(FIELDS).contains(name)) {
                throw new IllegalArgumentException("unknown tenant budget '" + name + "' (known: " + String.join(", ", FIELDS) + ")");
            }
        }
        String hex = namespace.toLowerCase(Locale.ROOT);
        if (!hex.matches("[0-9a-f]{64}")) {
            throw new IllegalArgumentException("a tenant quota names its namespace by its digest, 64 hex digits (as /status"
                    + " shows it), got '" + namespace + "'");
        }
        NamespaceDigest digest = NamespaceDigest.ofBytes(HexFormat.of().parseHex(hex));
        return new TenantQuota(digest, tenant, size(sizes.get("dramBytes"), TenantQuota.UNLIMITED),
                size(sizes.get("dramGuaranteedBytes"), 0), size(sizes.get("ssdBytes"), TenantQuota.UNLIMITED));
    }

    private static long size(String text, long absent) {
        return text == null ? absent : ByteSize.parse(text);
    }
}
