package io.orbitkv.server.config;

import com.fasterxml.jackson.databind.JsonNode;
import io.orbitkv.core.cost.CostConfig;
import io.orbitkv.core.cost.SelectionConfig;
import io.orbitkv.core.engine.HintBounds;
import io.orbitkv.core.engine.ManagerBounds;
import io.orbitkv.core.query.SpeculationBounds;
import io.orbitkv.core.storage.dram.DramEviction;
import io.orbitkv.core.storage.dram.DramTierConfig;
import io.orbitkv.core.storage.publish.SsdAdmissionPolicy;
import io.orbitkv.core.storage.ssd.ReadPath;
import io.orbitkv.server.channel.ChannelServer;
import io.orbitkv.state.protocol.ProtocolLimits;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.function.BiConsumer;
import java.util.stream.Collectors;

/**
 * The one table of configuration keys: each key's name, its default (as a user would write it in
 * a file), its meaning (for errors) and how a JSON value sets it on a {@link ConfigBuilder}. The
 * defaults, the JSON file, the environment aliases and the command line all go through it, and
 * {@code docs/operations.md} documents every key ({@code ManagerConfigTest} checks that).
 *
 * <p>Stateless; the table is immutable. Design note: a default is text parsed by the same setter
 * as a file's value, so a default can never be a value a user could not write; two defaults
 * follow other keys instead ({@code stagingBytes} = {@code dramBytes / 8}, {@code readyFile} =
 * {@code <ssdDir>/manager.ready}) and are set by {@link ConfigBuilder#defaults()}.
 */
public final class ConfigKeys {

    /**
     * One configuration key.
     *
     * @param name         the key, as a file and {@code --set} spell it
     * @param defaultValue the embedded default as text; empty when there is none or it follows another key
     * @param meaning      what it sets, in a few words
     * @param setter       parses a JSON value onto a builder; throws IllegalArgumentException for a bad value
     */
    public record Key(String name, Optional<String> defaultValue, String meaning, BiConsumer<ConfigBuilder, JsonNode> setter) {
    }

    /**
     * Environment variables that are documented aliases of keys: exactly {@code 1} sets the key to
     * {@code true} before the file and the command line are applied; any other value leaves it.
     */
    public static final Map<String, String> ENV_ALIASES = Map.of(
            CostConfig.OBSERVATIONS_ENV, "costObservations",
            SelectionConfig.SELECTION_ENV, "costSelection",
            SelectionConfig.CROSS_MEDIUM_ENV, "costCrossMediumSelection");

    /** Default working directory of a Manager, relative to where it starts ({@link ManagerConfig#VAR_DIR}). */
    static final Path VAR_DIR = Path.of("var", "orbitkv");
    /** Default {@code regionDir} ({@link ManagerConfig#DEFAULT_REGION_DIR}). */
    static final Path DEFAULT_REGION_DIR = Path.of("/dev/shm");
    private static final ProtocolLimits LIMITS = ProtocolLimits.DEFAULTS;
    private static final ManagerBounds BOUNDS = ManagerBounds.DEFAULTS;
    private static final SpeculationBounds SPECULATION = SpeculationBounds.DEFAULTS;

    /** Every key a file or an override may name, in documentation order. */
    public static final Map<String, Key> KEYS = table(List.of(
            key("dramDir", "/dev/shm/orbitkv-" + System.getProperty("user.name", "user").replaceAll("[^A-Za-z0-9_-]", "_"),
                    "directory of the DRAM lock file (arenas are memfds)", (b, v) -> b.dramDir = path(v)),
            key("arenaName", "manager", "name stem of the DRAM lock file and arena memfds", (b, v) -> b.arenaName = text(v)),
            key("dramBytes", "1g", "bytes of DRAM slots (size)", (b, v) -> b.dramBytes = size(v)),
            key("dramSlotBytes", DramTierConfig.DEFAULT_SLOT_BYTES.stream().map(String::valueOf).collect(Collectors.joining(",")),
                     "slot sizes (array of sizes)", (b, v) -> b.dramSlotBytes = sizes(v)),
            key("dramEviction", "chain", "DRAM eviction policy: chain, lru or w-tinylfu",
                    (b, v) -> b.dramEviction = DramEviction.parse(text(v))),
            key("stagingBytes", null, "DRAM reserved but not yet committed (size)", (b, v) -> b.stagingBytes = size(v)),
            key("ssdDir", VAR_DIR.resolve("ssd").toString(), "directory of the SSD store and manager.lock", (b, v) -> b.ssdDir = path(v)),
            key("ssdBytes", "4g", "bytes of SSD extent files (size)", (b, v) -> b.ssdBytes = size(v)),
            key("ssdFiles", "4", "number of SSD ring files", (b, v) -> b.ssdFiles = integer(v)),
            key("ssdIoThreads", "4", "SSD worker threads", (b, v) -> b.ssdIoThreads = integer(v)),
            key("ssdBufferedFallback", "true", "buffered I/O where O_DIRECT is refused",
                    (b, v) -> b.ssdBufferedFallback = bool(v)),
            key("ssdReadPath", "auto", "SSD read route: positional, uring or auto",
                    (b, v) -> b.ssdReadPath = ReadPath.parse(text(v))),
            key("ssdPolicy", "write-through", "write-through, on-evict, reuse-aware[:N]",
                    (b, v) -> b.ssdPolicy = SsdAdmissionPolicy.parse(text(v))),
            key("ssdWriteBytesPerSecond", "1g", "SSD write budget (size per second)",
                    (b, v) -> b.ssdWriteBytesPerSecond = size(v)),
            key("ssdWriteBurstBytes", "64m", "SSD write burst (size)", (b, v) -> b.ssdWriteBurstBytes = size(v)),
            key("ssdWriteQueueBytes", "256m", "SSD writes admitted, not yet written (size)",
                    (b, v) -> b.ssdWriteQueueBytes = size(v)),
            key("maxInflightStages", "256", "keys staged from SSD at once", (b, v) -> b.maxInflightStages = integer(v)),
            key("maxLeases", String.valueOf(BOUNDS.maxLeases()), "global lease table entries",
                    (b, v) -> b.maxLeases = size(v)),
            key("restoreCopyThreads", String.valueOf(BOUNDS.restoreCopyThreads()), "restore copy threads",
                    (b, v) -> b.restoreCopyThreads = integer(v)),
            key("socket", VAR_DIR.resolve("manager.sock").toString(), "engine channel socket path", (b, v) -> b.socket = path(v)),
            key("socketMode", "0600", "socket permissions, 0600 or 0660", (b, v) -> b.socketMode = text(v)),
            key("httpHost", "127.0.0.1", "HTTP bind address", (b, v) -> b.httpHost = text(v)),
            key("httpPort", String.valueOf(ManagerConfig.DEFAULT_HTTP_PORT), "HTTP port, 0 = any free port",
                    (b, v) -> b.httpPort = integer(v)),
            key("readyFile", null, "file the ready line is written to", (b, v) -> b.readyFile = path(v)),
            key("regionDir", DEFAULT_REGION_DIR.toString(),
                    "the only directory REGISTER_REGION files may be in (client-owned files only)",
                    (b, v) -> b.regionDir = path(v)),
            key("maxFrameBytes", String.valueOf(LIMITS.maxFrameBytes()), "largest frame (size)",
                    (b, v) -> b.maxFrameBytes = Math.toIntExact(size(v))),
            key("maxConnections", String.valueOf(LIMITS.maxConnections()), "client connections at once",
                    (b, v) -> b.maxConnections = integer(v)),
            key("maxOperationsPerConnection", String.valueOf(LIMITS.maxOperationsPerConnection()),
                    "live operations per connection", (b, v) -> b.maxOperationsPerConnection = integer(v)),
            key("maxReservationsPerConnection", String.valueOf(LIMITS.maxReservationsPerConnection()),
                    "live publish reservations per connection", (b, v) -> b.maxReservationsPerConnection = integer(v)),
            key("maxRegionsPerConnection", String.valueOf(LIMITS.maxRegionsPerConnection()),
                    "destination regions per connection", (b, v) -> b.maxRegionsPerConnection = integer(v)),
            key("outboundQueueFrames", "1024", "COMPLETION frames queued per connection",
                    (b, v) -> b.outboundQueueFrames = integer(v)),
            key("drainTimeoutMillis", "10000", "shutdown drain bound, ms", (b, v) -> b.drainTimeoutMillis = size(v)),
            key("registerTimeoutMillis", String.valueOf(ChannelServer.Settings.DEFAULT_REGISTER_TIMEOUT.toMillis()),
                    "how long a connection may stay unregistered, ms", (b, v) -> b.registerTimeoutMillis = size(v)),
            key("maxUnregisteredConnections", "0", "connections not yet registered at once; 0 = maxConnections / 8",
                    (b, v) -> b.maxUnregisteredConnections = integer(v)),
            key("publishQuarantineMillis", String.valueOf(TimeUnit.NANOSECONDS.toMillis(BOUNDS.publishQuarantineNanos())),
                    "how long a closed session's unsealed publish slots are held, ms",
                    (b, v) -> b.publishQuarantineMillis = size(v)),
            key("prepareInFlightBytes", String.valueOf(SPECULATION.inFlightBytes()),
                    "bytes all PREPAREs may have admitted and not landed (size)", (b, v) -> b.prepareInFlightBytes = size(v)),
            key("prepareHeldBytes", String.valueOf(SPECULATION.heldBytes()),
                    "bytes all PREPAREs may hold in DRAM (size)", (b, v) -> b.prepareHeldBytes = size(v)),
            key("prepareSessionInFlightBytes", String.valueOf(SPECULATION.sessionInFlightBytes()),
                    "prepareInFlightBytes per connection (size)", (b, v) -> b.prepareSessionInFlightBytes = size(v)),
            key("prepareSessionHeldBytes", String.valueOf(SPECULATION.sessionHeldBytes()),
                    "prepareHeldBytes per connection (size)", (b, v) -> b.prepareSessionHeldBytes = size(v)),
            key("prepareMarginMillis", String.valueOf(TimeUnit.NANOSECONDS.toMillis(SPECULATION.marginNanos())),
                    "a PREPARE's reads start this much before first use - estimated staging time, ms",
                    (b, v) -> b.prepareMarginMillis = size(v)),
            key("prepareGraceMillis", String.valueOf(TimeUnit.NANOSECONDS.toMillis(SPECULATION.graceNanos())),
                    "prepared pages not used by first use + this are released, ms", (b, v) -> b.prepareGraceMillis = size(v)),
            key("prepareMaxLeadMillis", String.valueOf(TimeUnit.NANOSECONDS.toMillis(SPECULATION.maxLeadNanos())),
                    "the furthest ahead a PREPARE's first use may lie (later is taken as this), ms",
                    (b, v) -> b.prepareMaxLeadMillis = size(v)),
            key("hintPinMaxMillis", String.valueOf(TimeUnit.NANOSECONDS.toMillis(HintBounds.DEFAULTS.pinMaxNanos())),
                    "the longest a HINT PIN keeps a page, ms", (b, v) -> b.hintPinMaxMillis = size(v)),
            key("hintPinnedBytesPerNamespace", ByteSize.format(HintBounds.DEFAULTS.pinnedBytesPerNamespace()),
                    "DRAM bytes one namespace may hold pinned by HINT PIN (size)",
                    (b, v) -> b.hintPinnedBytesPerNamespace = size(v)),
            key("tenantQuotas", "", "per-tenant DRAM and SSD budgets, by namespace digest and tenant label",
                    (b, v) -> b.tenantQuotas = TenantQuotaConfig.parse(v)),
            key("etcd", "", "etcd client URLs, comma-separated; empty = single-node",
                    (b, v) -> b.etcd = text(v).isBlank() ? List.of() : List.of(text(v).strip().split("\\s*,\\s*"))),
            key("nodeId", "", "this node's stable name in the cluster", (b, v) -> b.nodeId = text(v)),
            key("clusterId", "orbitkv", "cluster name (etcd prefix, auth header)", (b, v) -> b.clusterId = text(v)),
            key("clusterListen", "127.0.0.1:0", "cluster gRPC address host:port", (b, v) -> b.clusterListen = text(v)),
            key("clusterDataListen", "", "bulk data plane address host:port; empty = cluster host, any port",
                    (b, v) -> b.clusterDataListen = text(v)),
            key("clusterTokenFile", null, "file holding the cluster token",
                    (b, v) -> b.clusterTokenFile = Optional.of(path(v))),
            key("clusterTlsCert", null, "certificate chain for mutual TLS (PEM)",
                    (b, v) -> b.clusterTlsCert = Optional.of(path(v))),
            key("clusterTlsKey", null, "PKCS#8 private key for mutual TLS (PEM)",
                    (b, v) -> b.clusterTlsKey = Optional.of(path(v))),
            key("clusterTlsCa", null, "CA bundle peers must chain to (PEM)", (b, v) -> b.clusterTlsCa = Optional.of(path(v))),
            key("clusterLeaseTtlMillis", "5000", "etcd lease TTL, ms (>= 2000)", (b, v) -> b.clusterLeaseTtlMillis = size(v)),
            key("clusterLookupTimeoutMillis", "200", "catalog lookup batch deadline, ms",
                    (b, v) -> b.clusterLookupTimeoutMillis = size(v)),
            key("catalogReplicas", "2", "catalog owners holding each key's residency evidence (1..8)",
                    (b, v) -> b.catalogReplicas = integer(v)),
            key("kvEventsEndpoint", "", "KV events PUB address tcp://host:port; empty = off",
                    (b, v) -> b.kvEventsEndpoint = text(v).strip()),
            key("kvEventsReplayEndpoint", "", "KV events replay ROUTER address tcp://host:port; empty = none",
                    (b, v) -> b.kvEventsReplayEndpoint = text(v).strip()),
            key("kvEventsReplayBatches", "10000", "KV event batches kept for replay",
                    (b, v) -> b.kvEventsReplayBatches = integer(v)),
            key("kvEventsNamedBlocks", "262144", "engine block names kept for KV events",
                    (b, v) -> b.kvEventsNamedBlocks = integer(v)),
            key("costObservations", "false", "time executed operations and keep cost estimates (alias ORBITKV_COST_OBSERVATIONS=1)",
                    (b, v) -> b.costObservations = bool(v)),
            key("costSelection", "false", "guarded same-medium source selection; needs costObservations",
                    (b, v) -> b.costSelection = bool(v)),
            key("costCrossMediumSelection", "false", "guarded selection across media; needs costSelection",
                    (b, v) -> b.costCrossMediumSelection = bool(v))));

    private ConfigKeys() {
    }

    private static Key key(String name, String defaultValue, String meaning, BiConsumer<ConfigBuilder, JsonNode> setter) {
        return new Key(name, Optional.ofNullable(defaultValue), meaning, setter);
    }

    private static Map<String, Key> table(List<Key> keys) {
        Map<String, Key> map = new LinkedHashMap<>();
        for (Key k : keys) map.put(k.name(), k);
        return Collections.unmodifiableMap(map);
    }

    private static String text(JsonNode v) {
        if (!v.isTextual()) throw new IllegalArgumentException("expected a string, got " + v);
        return v.asText();
    }

    private static Path path(JsonNode v) {
        String t = text(v);
        if (t.isBlank()) throw new IllegalArgumentException("empty path");
        return Path.of(t);
    }

    private static long size(JsonNode v) {
        if (v.isIntegralNumber() && v.canConvertToLong()) return v.asLong();
        return ByteSize.parse(text(v));
    }

    private static int integer(JsonNode v) {
        if (v.isIntegralNumber() && v.canConvertToInt()) return v.asInt();
        try {
            return Integer.parseInt(text(v).strip());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("expected an integer, got " + v);
        }
    }

    private static boolean bool(JsonNode v) {
        if (v.isBoolean()) return v.asBoolean();
        return switch (text(v)) {
            case "true" -> true;
            case "false" -> false;
            default -> throw new IllegalArgumentException("expected true or false, got " + v);
        };
    }

    private static List<Integer> sizes(JsonNode v) {
        List<Integer> out = new ArrayList<>();
        if (!v.isArray()) {
            for (String part : text(v).split(",")) out.add(Math.toIntExact(ByteSize.parse(part)));
            return out;
        }
        for (JsonNode n : v) out.add(Math.toIntExact(size(n)));
        return out;
    }
}
