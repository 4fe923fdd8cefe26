package io.orbitkv.server.config;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.TextNode;
import io.orbitkv.core.cost.CostConfig;
import io.orbitkv.core.cost.SelectionConfig;
import io.orbitkv.core.engine.HintBounds;
import io.orbitkv.core.engine.ManagerBounds;
import io.orbitkv.core.query.SpeculationBounds;
import io.orbitkv.core.storage.TieredStoreConfig;
import io.orbitkv.core.storage.dram.DramEviction;
import io.orbitkv.core.storage.publish.SsdAdmissionPolicy;
import io.orbitkv.core.storage.ssd.ReadPath;
import io.orbitkv.server.channel.ChannelServer;
import io.orbitkv.server.channel.DescriptorServer;
import io.orbitkv.server.events.KvEventPublisher;
import io.orbitkv.state.protocol.ProtocolLimits;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;

/**
 * Everything a single-node Manager needs to start, grouped by what it configures: the DRAM tier,
 * the SSD tier, where the Manager is reached, the engine channel, the Manager logic's budgets,
 * the cluster, KV events and cost observation. Built from the embedded {@link #defaults()}, then
 * the environment aliases ({@link #withEnvironment}), a JSON file ({@link #withJson}) and
 * command-line overrides ({@link #withOverrides}); each layer names keys of the one table
 * {@link ConfigKeys#KEYS}, documented in {@code docs/operations.md}.
 *
 * <p>Immutable value. Invariant: a {@code ManagerConfig} always converts to a valid
 * {@link TieredStoreConfig}, {@link ManagerBounds} and {@link ProtocolLimits} (checked in the
 * constructors), so a bad value is refused when the file is read, with the key's name, not when a
 * tier opens. The conversions live in {@link ConfigConversions}.
 *
 * <p>Design note: the file and the command line go through the same key table (a key's setter
 * takes a JSON node; a command-line value arrives as a text node), so an override can never mean
 * something different from the same key in a file, and unknown keys are refused in both places
 * (a misspelt {@code ssdByte} silently ignored would leave a 4 GiB default in place). Sizes accept
 * a number or a string with a binary suffix ({@link ByteSize}). A record of eight groups rather
 * than one record of 52 components: each group validates its own keys, and no constructor call
 * takes more than eight values by position.
 *
 * @param dram      the DRAM tier
 * @param ssd       the SSD tier and its write budget
 * @param endpoints the engine socket, the HTTP endpoint and the ready file
 * @param channel   the engine channel's budgets and the region directory
 * @param budgets   the Manager logic's bounds and the drain bound
 * @param cluster   etcd membership, cluster endpoint and catalog; single-node when no etcd is set
 * @param kvEvents  the KV event publisher ({@code docs/kv-events.md}); off unless an endpoint is set
 * @param cost      cost observation and guarded selection; off by default
 */
public record ManagerConfig(Dram dram, Ssd ssd, Endpoints endpoints, Channel channel, Budgets budgets,
                            ClusterConfig cluster, KvEvents kvEvents, Cost cost) {

    /** Default working directory of a Manager, relative to where it starts. */
    public static final Path VAR_DIR = ConfigKeys.VAR_DIR;
    /** Default HTTP port (the Prometheus exporter convention range). */
    public static final int DEFAULT_HTTP_PORT = 9464;
    /**
     * Default {@link Channel#regionDir}: {@code /dev/shm}, the shared-memory mount engines already
     * keep their regions on. It is world-writable and sticky, so an engine of any user can create
     * its region there and none can replace another's; the owner check admits only the client's
     * own files, and the Manager's arena directory inside it is excluded.
     */
    public static final Path DEFAULT_REGION_DIR = ConfigKeys.DEFAULT_REGION_DIR;
    /** Name of the lock file inside {@link Ssd#dir}. */
    public static final String LOCK_FILE = "manager.lock";
    /** Every key a file or an override may name, in documentation order ({@link ConfigKeys#KEYS}). */
    public static final Map<String, ConfigKeys.Key> KEYS = ConfigKeys.KEYS;
    /**
     * Reads configuration files: JSON plus {@code //} and {@code /* *}{@code /} comments and a
     * trailing comma, so an example file can explain every key and a user can uncomment any line
     * of it (plain JSON has neither).
     */
    private static final ObjectMapper FILE_MAPPER = JsonMapper.builder()
            .enable(JsonReadFeature.ALLOW_JAVA_COMMENTS, JsonReadFeature.ALLOW_TRAILING_COMMA).build();

    /**
     * The DRAM tier.
     *
     * @param dir          directory of the DRAM lock file (the arenas are memfds)
     * @param arenaName    name stem of the lock file and the arenas, {@code [A-Za-z0-9_-]{1,64}}
     * @param bytes        bytes of DRAM slots in all size classes together
     * @param slotBytes    slot sizes, strictly increasing multiples of 4 KiB
     * @param eviction     which resident image a full DRAM tier evicts ({@code w-tinylfu} or {@code lru})
     * @param stagingBytes DRAM bytes that may be reserved and not yet committed (publishes, SSD stagings);
     *                     also the query staging budget; follows {@code bytes / 8} unless set
     */
    public record Dram(Path dir, String arenaName, long bytes, List<Integer> slotBytes, DramEviction eviction,
                       long stagingBytes) {
        public Dram {
            Objects.requireNonNull(dir, "dramDir");
            Objects.requireNonNull(arenaName, "arenaName");
            slotBytes = List.copyOf(slotBytes);
            Objects.requireNonNull(eviction, "dramEviction");
        }
    }

    /**
     * The SSD tier.
     *
     * @param dir              directory of the SSD extent files and of {@link #LOCK_FILE}
     * @param bytes            bytes of SSD extent files in all
     * @param files            number of extent ring files
     * @param ioThreads        SSD worker threads (also the in-flight I/O bound)
     * @param bufferedFallback use buffered I/O where the file system refuses O_DIRECT (tmpfs, overlayfs)
     * @param readPath         SSD read route: positional, uring (fails to start without io_uring) or auto
     * @param writes           when and how fast pages are written to SSD
     */
    public record Ssd(Path dir, long bytes, int files, int ioThreads, boolean bufferedFallback, ReadPath readPath,
                      SsdWrites writes) {
        public Ssd {
            Objects.requireNonNull(dir, "ssdDir");
            Objects.requireNonNull(readPath, "ssdReadPath");
            Objects.requireNonNull(writes, "writes");
            if (files < 1) throw new IllegalArgumentException("ssdFiles must be >= 1: " + files);
        }
    }

    /**
     * SSD admission and its write budget.
     *
     * @param policy         when a DRAM-resident page is written to SSD
     * @param bytesPerSecond SSD write budget, bytes per second
     * @param burstBytes     the budget's burst, bytes
     * @param queueBytes     bytes admitted for SSD and not yet written
     */
    public record SsdWrites(SsdAdmissionPolicy policy, long bytesPerSecond, long burstBytes, long queueBytes) {
        public SsdWrites {
            Objects.requireNonNull(policy, "ssdPolicy");
        }
    }

    /**
     * Where the Manager is reached and where it says it serves.
     *
     * @param socket     path of the engine channel's Unix socket
     * @param socketMode permissions of the socket file, {@code 0600} or {@code 0660}
     * @param httpHost   address the HTTP endpoint binds
     * @param httpPort   HTTP port; 0 picks a free one
     * @param readyFile  file the Manager writes its ready line to once serving
     */
    public record Endpoints(Path socket, String socketMode, String httpHost, int httpPort, Path readyFile) {
        public Endpoints {
            Objects.requireNonNull(socket, "socket");
            Objects.requireNonNull(httpHost, "httpHost");
            Objects.requireNonNull(readyFile, "readyFile");
            if (!"0600".equals(socketMode) && !"0660".equals(socketMode)) {
                throw new IllegalArgumentException("socketMode must be 0600 or 0660: " + socketMode);
            }
            if (httpPort < 0 || httpPort > 65_535) throw new IllegalArgumentException("httpPort must be 0..65535: " + httpPort);
            if (socket.toString().getBytes(StandardCharsets.UTF_8).length > 107) {
                throw new IllegalArgumentException("socket path is longer than the 107 bytes a Unix socket allows: " + socket);
            }
        }
    }

    /**
     * The engine channel's budgets.
     *
     * @param limits                     the channel's budgets (sent to clients in REGISTERED)
     * @param outboundQueueFrames        COMPLETION frames queued per connection before events are dropped
     * @param registerTimeoutMillis      how long a connection may stay unregistered before ERROR
     *                                   REGISTER_TIMEOUT (protocol §9.1)
     * @param maxUnregisteredConnections connections not yet REGISTERED at once; 0 = {@code maxConnections / 8}, at least 1
     * @param regionDir                  the only directory whose files REGISTER_REGION accepts (protocol §5.2): a
     *                                   regular file in it owned by the connecting client's uid, outside
     *                                   the DRAM and SSD directories
     */
    public record Channel(ProtocolLimits limits, int outboundQueueFrames, long registerTimeoutMillis,
                          int maxUnregisteredConnections, Path regionDir) {
        public Channel {
            Objects.requireNonNull(limits, "limits");
            Objects.requireNonNull(regionDir, "regionDir");
            if (outboundQueueFrames < 1) throw new IllegalArgumentException("outboundQueueFrames must be >= 1");
            if (registerTimeoutMillis < 1) throw new IllegalArgumentException("registerTimeoutMillis must be >= 1");
            if (maxUnregisteredConnections < 0 || maxUnregisteredConnections > limits.maxConnections()) {
                throw new IllegalArgumentException("maxUnregisteredConnections must be in [0, maxConnections = "
                        + limits.maxConnections() + "] (0 = maxConnections / 8): " + maxUnregisteredConnections);
            }
        }
    }

    /**
     * The Manager logic's bounds.
     *
     * @param maxInflightStages       distinct keys being staged from SSD at once
     * @param maxLeases               pages leased to all operations of all sessions at once (global lease table)
     * @param restoreCopyThreads      platform threads copying leased pages into engine regions (RESTORE)
     * @param drainTimeoutMillis      how long shutdown waits for sessions and SSD work to drain
     * @param publishQuarantineMillis how long a closed or fenced session's unsealed publish slots are held
     *                                before they are freed (protocol §9.6); 0 frees them at once
     * @param speculation             PREPARE's speculation budget and timing (protocol §5.11)
     * @param hintPinMaxMillis        the longest a HINT PIN keeps a page (protocol §5.12), whatever it asks
     * @param hintPinnedBytesPerNamespace DRAM slot bytes one namespace may hold pinned by HINT PIN at once
     * @param tenantQuotas            per-tenant DRAM and SSD budgets ({@code tenantQuotas}); none by default
     */
    public record Budgets(int maxInflightStages, long maxLeases, int restoreCopyThreads, long drainTimeoutMillis,
                          long publishQuarantineMillis, SpeculationBounds speculation, long hintPinMaxMillis,
                          long hintPinnedBytesPerNamespace, io.orbitkv.core.namespace.TenantQuotas tenantQuotas) {
        public Budgets {
            Objects.requireNonNull(speculation, "speculation");
            Objects.requireNonNull(tenantQuotas, "tenantQuotas");
            if (drainTimeoutMillis < 1) throw new IllegalArgumentException("drainTimeoutMillis must be >= 1");
            if (publishQuarantineMillis < 0) throw new IllegalArgumentException("publishQuarantineMillis must be >= 0");
            if (hintPinMaxMillis < 1) throw new IllegalArgumentException("hintPinMaxMillis must be >= 1");
            if (hintPinnedBytesPerNamespace < 0) throw new IllegalArgumentException("hintPinnedBytesPerNamespace must be >= 0");
        }

        /** The core's HINT bounds ({@link HintBounds}); the pin table's size stays the core's default. */
        public HintBounds hintBounds() {
            return new HintBounds(TimeUnit.MILLISECONDS.toNanos(hintPinMaxMillis), hintPinnedBytesPerNamespace,
                    HintBounds.DEFAULTS.maxPins());
        }
    }

    /**
     * KV placement events in vLLM's format ({@code docs/kv-events.md}).
     *
     * @param endpoint       ZeroMQ PUB bind address {@code tcp://host:port}; empty = off (the default)
     * @param replayEndpoint ZeroMQ ROUTER bind address for replay requests; empty = no replay
     * @param replayBatches  recent batches kept for replay
     * @param namedBlocks    engine block names kept to translate keys back into block hashes
     */
    public record KvEvents(String endpoint, String replayEndpoint, int replayBatches, int namedBlocks) {
        /** Off, with vLLM's replay depth (10,000 batches) and 262,144 names (about 40 MiB at most). */
        public static final KvEvents OFF = new KvEvents("", "", 10_000, 262_144);

        public KvEvents {
            Objects.requireNonNull(endpoint, "kvEventsEndpoint");
            Objects.requireNonNull(replayEndpoint, "kvEventsReplayEndpoint");
            if (endpoint.isEmpty() && !replayEndpoint.isEmpty()) {
                throw new IllegalArgumentException("kvEventsReplayEndpoint needs kvEventsEndpoint");
            }
            // validates the endpoints (fields are not assigned yet in a compact constructor: pass the parameters)
            if (!endpoint.isEmpty()) {
                new KvEventPublisher.Settings(endpoint, replayEndpoint, replayBatches, namedBlocks, 1024);
            } else if (replayBatches < 1 || namedBlocks < 1) {
                throw new IllegalArgumentException("kvEventsReplayBatches and kvEventsNamedBlocks must be >= 1");
            }
        }

        public boolean enabled() {
            return !endpoint.isEmpty();
        }

        /** The publisher's settings (validates the endpoints). */
        public KvEventPublisher.Settings settings() {
            return new KvEventPublisher.Settings(endpoint, replayEndpoint, replayBatches, namedBlocks, 1024);
        }
    }

    /**
     * Cost observation and guarded selection (docs/operations.md, "Cost observations and SSD read
     * routes"). Each switch counts only with the one before it: selection needs observations (no
     * estimates, nothing to select by), cross-medium selection needs selection.
     *
     * @param observations         time executed operations and keep estimates ({@code costObservations})
     * @param selection            let the guarded rule pick another same-medium source ({@code costSelection})
     * @param crossMediumSelection let it pick a source on another medium too ({@code costCrossMediumSelection})
     */
    public record Cost(boolean observations, boolean selection, boolean crossMediumSelection) {
        /** The estimator's budgets with observations on or off. */
        public CostConfig costConfig() {
            return CostConfig.defaults(observations);
        }

        /** The selection switches, each off unless the ones it needs are on. */
        public SelectionConfig selectionConfig() {
            return SelectionConfig.of(observations, selection, crossMediumSelection);
        }
    }

    public ManagerConfig {
        Objects.requireNonNull(dram, "dram");
        Objects.requireNonNull(ssd, "ssd");
        Objects.requireNonNull(endpoints, "endpoints");
        Objects.requireNonNull(channel, "channel");
        Objects.requireNonNull(budgets, "budgets");
        Objects.requireNonNull(cluster, "cluster");
        Objects.requireNonNull(kvEvents, "kvEvents");
        Objects.requireNonNull(cost, "cost");
        Path regionDir = channel.regionDir();
        for (Path own : List.of(dram.dir(), ssd.dir())) {
            if (regionDir.toAbsolutePath().normalize().startsWith(own.toAbsolutePath().normalize())) {
                throw new IllegalArgumentException("regionDir " + regionDir + " must not lie inside the Manager's own "
                        + own + ": a region there could name the Manager's own files");
            }
        }
        ConfigConversions.storeConfig(dram, ssd, budgets);
        ConfigConversions.coreBounds(dram, budgets);
    }

    /**
     * The embedded defaults ({@link ConfigKeys#KEYS}): 1 GiB of DRAM in {@code /dev/shm/orbitkv-<user>},
     * 4 GiB of SSD under {@code ./var/orbitkv/ssd}, write-through SSD admission at up to 1 GiB/s,
     * socket {@code ./var/orbitkv/manager.sock} (0600), HTTP on 127.0.0.1:9464, protocol limits of
     * {@code docs/protocol.md}, single-node, KV events and cost observation off.
     */
    public static ManagerConfig defaults() {
        return ConfigBuilder.defaults().build();
    }

    /**
     * This configuration with the environment aliases of {@code env} applied
     * ({@link ConfigKeys#ENV_ALIASES}: {@code ORBITKV_COST_OBSERVATIONS=1} sets {@code costObservations}, ...).
     */
    public ManagerConfig withEnvironment(Map<String, String> env) {
        Map<String, String> values = new LinkedHashMap<>();
        ConfigKeys.ENV_ALIASES.forEach((variable, key) -> {
            if ("1".equals(env.get(variable))) values.put(key, "true");
        });
        return apply(values, "environment");
    }

    /**
     * This configuration with the keys of the JSON object in {@code file} applied.
     *
     * @throws ConfigException if the file cannot be read, is not a JSON object, names an unknown
     *         key or holds a bad value
     */
    public ManagerConfig withJson(Path file) {
        JsonNode root;
        try {
            root = FILE_MAPPER.readTree(Files.readString(file));
        } catch (JsonProcessingException e) {
            throw new ConfigException(file + ": not valid JSON: " + e.getOriginalMessage());
        } catch (IOException e) {
            throw new ConfigException(file + ": cannot read: " + e.getMessage());
        }
        if (root == null || !root.isObject()) throw new ConfigException(file + ": must hold one JSON object");
        Map<String, JsonNode> values = new LinkedHashMap<>();
        for (Map.Entry<String, JsonNode> e : root.properties()) values.put(e.getKey(), e.getValue());
        return ConfigBuilder.apply(this, values, file.toString());
    }

    /** This configuration with {@code overrides} (key → text, e.g. {@code dramBytes → 512m}) applied. */
    public ManagerConfig withOverrides(Map<String, String> overrides) {
        return apply(overrides, "command line");
    }

    private ManagerConfig apply(Map<String, String> texts, String source) {
        Map<String, JsonNode> values = new LinkedHashMap<>();
        texts.forEach((k, v) -> values.put(k, TextNode.valueOf(v)));
        return ConfigBuilder.apply(this, values, source);
    }

    /** The tiered store this configuration describes. */
    public TieredStoreConfig storeConfig() {
        return ConfigConversions.storeConfig(dram, ssd, budgets);
    }

    /** The Manager logic's bounds ({@link ConfigConversions#coreBounds}). */
    public ManagerBounds coreBounds() {
        return ConfigConversions.coreBounds(dram, budgets);
    }

    /** The engine channel's settings: socket, limits, queues and the registration policy (protocol §9.1). */
    public ChannelServer.Settings channelSettings() {
        return ConfigConversions.channelSettings(endpoints, channel, budgets);
    }

    /** The descriptor socket beside the channel socket ({@code <socket>.fd}, protocol §6.11). */
    public DescriptorServer.Settings descriptorSettings() {
        return ConfigConversions.descriptorSettings(endpoints, channel);
    }

    /** The lock file that keeps two Managers off one store. */
    public Path lockFile() {
        return ssd.dir().resolve(LOCK_FILE);
    }
}
