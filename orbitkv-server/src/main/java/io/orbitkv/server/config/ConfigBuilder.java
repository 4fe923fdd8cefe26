package io.orbitkv.server.config;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.TextNode;
import io.orbitkv.core.query.SpeculationBounds;
import io.orbitkv.core.storage.dram.DramEviction;
import io.orbitkv.core.storage.publish.SsdAdmissionPolicy;
import io.orbitkv.core.storage.ssd.ReadPath;
import io.orbitkv.state.protocol.ProtocolLimits;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * One key per field: the mutable form of a {@link ManagerConfig} while a layer of keys (the
 * defaults, a file, the environment aliases, the command line) is applied to it through
 * {@link ConfigKeys#KEYS}. {@link #build()} assembles the groups by name, so no call here passes
 * more than eight values by position.
 *
 * <p>Confined to the thread applying one layer; never shared. Two keys follow others unless a
 * layer names them: {@code stagingBytes} follows {@code dramBytes / 8}, and {@code readyFile}
 * follows {@code ssdDir} (it stays inside the store's directory, see {@link #defaultReadyFile}).
 */
public final class ConfigBuilder {

    Path dramDir;
    String arenaName;
    long dramBytes;
    List<Integer> dramSlotBytes;
    DramEviction dramEviction;
    long stagingBytes;
    Path ssdDir;
    long ssdBytes;
    int ssdFiles;
    int ssdIoThreads;
    boolean ssdBufferedFallback;
    ReadPath ssdReadPath;
    SsdAdmissionPolicy ssdPolicy;
    long ssdWriteBytesPerSecond;
    long ssdWriteBurstBytes;
    long ssdWriteQueueBytes;
    int maxInflightStages;
    long maxLeases;
    int restoreCopyThreads;
    Path socket;
    String socketMode;
    String httpHost;
    int httpPort;
    Path readyFile;
    Path regionDir;
    int maxFrameBytes;
    int maxConnections;
    int maxOperationsPerConnection;
    int maxReservationsPerConnection;
    int maxRegionsPerConnection;
    int outboundQueueFrames;
    long drainTimeoutMillis;
    long registerTimeoutMillis;
    int maxUnregisteredConnections;
    long publishQuarantineMillis;
    long prepareInFlightBytes;
    long prepareHeldBytes;
    long prepareSessionInFlightBytes;
    long prepareSessionHeldBytes;
    long prepareMarginMillis;
    long prepareGraceMillis;
    long prepareMaxLeadMillis;
    long hintPinMaxMillis;
    long hintPinnedBytesPerNamespace;
    io.orbitkv.core.namespace.TenantQuotas tenantQuotas;
    List<String> etcd;
    String nodeId;
    String clusterId;
    String clusterListen;
    String clusterDataListen;
    Optional<Path> clusterTokenFile = Optional.empty();
    Optional<Path> clusterTlsCert = Optional.empty();
    Optional<Path> clusterTlsKey = Optional.empty();
    Optional<Path> clusterTlsCa = Optional.empty();
    long clusterLeaseTtlMillis;
    long clusterLookupTimeoutMillis;
    int catalogReplicas;
    String kvEventsEndpoint;
    String kvEventsReplayEndpoint;
    int kvEventsReplayBatches;
    int kvEventsNamedBlocks;
    boolean costObservations;
    boolean costSelection;
    boolean costCrossMediumSelection;

    private ConfigBuilder() {
    }

    /** Every key at its default from the table; the two that follow other keys follow them. */
    static ConfigBuilder defaults() {
        ConfigBuilder b = new ConfigBuilder();
        for (ConfigKeys.Key k : ConfigKeys.KEYS.values()) {
            k.defaultValue().ifPresent(d -> k.setter().accept(b, TextNode.valueOf(d)));
        }
        b.stagingBytes = b.dramBytes / 8;
        b.readyFile = defaultReadyFile(b.ssdDir);
        return b;
    }

    /** The keys of {@code c}. */
    static ConfigBuilder of(ManagerConfig c) {
        ConfigBuilder b = new ConfigBuilder();
        ManagerConfig.Dram d = c.dram();
        b.dramDir = d.dir();
        b.arenaName = d.arenaName();
        b.dramBytes = d.bytes();
        b.dramSlotBytes = d.slotBytes();
        b.dramEviction = d.eviction();
        b.stagingBytes = d.stagingBytes();
        ManagerConfig.Ssd s = c.ssd();
        b.ssdDir = s.dir();
        b.ssdBytes = s.bytes();
        b.ssdFiles = s.files();
        b.ssdIoThreads = s.ioThreads();
        b.ssdBufferedFallback = s.bufferedFallback();
        b.ssdReadPath = s.readPath();
        b.ssdPolicy = s.writes().policy();
        b.ssdWriteBytesPerSecond = s.writes().bytesPerSecond();
        b.ssdWriteBurstBytes = s.writes().burstBytes();
        b.ssdWriteQueueBytes = s.writes().queueBytes();
        ManagerConfig.Budgets g = c.budgets();
        b.maxInflightStages = g.maxInflightStages();
        b.maxLeases = g.maxLeases();
        b.restoreCopyThreads = g.restoreCopyThreads();
        b.drainTimeoutMillis = g.drainTimeoutMillis();
        b.publishQuarantineMillis = g.publishQuarantineMillis();
        SpeculationBounds sp = g.speculation();
        b.prepareInFlightBytes = sp.inFlightBytes();
        b.prepareHeldBytes = sp.heldBytes();
        b.prepareSessionInFlightBytes = sp.sessionInFlightBytes();
        b.prepareSessionHeldBytes = sp.sessionHeldBytes();
        b.prepareMarginMillis = TimeUnit.NANOSECONDS.toMillis(sp.marginNanos());
        b.prepareGraceMillis = TimeUnit.NANOSECONDS.toMillis(sp.graceNanos());
        b.prepareMaxLeadMillis = TimeUnit.NANOSECONDS.toMillis(sp.maxLeadNanos());
        b.hintPinMaxMillis = g.hintPinMaxMillis();
        b.hintPinnedBytesPerNamespace = g.hintPinnedBytesPerNamespace();
        b.tenantQuotas = g.tenantQuotas();
        ManagerConfig.Endpoints e = c.endpoints();
        b.socket = e.socket();
        b.socketMode = e.socketMode();
        b.httpHost = e.httpHost();
        b.httpPort = e.httpPort();
        b.readyFile = e.readyFile();
        ManagerConfig.Channel ch = c.channel();
        ProtocolLimits l = ch.limits();
        b.maxFrameBytes = l.maxFrameBytes();
        b.maxConnections = l.maxConnections();
        b.maxOperationsPerConnection = l.maxOperationsPerConnection();
        b.maxReservationsPerConnection = l.maxReservationsPerConnection();
        b.maxRegionsPerConnection = l.maxRegionsPerConnection();
        b.outboundQueueFrames = ch.outboundQueueFrames();
        b.registerTimeoutMillis = ch.registerTimeoutMillis();
        b.maxUnregisteredConnections = ch.maxUnregisteredConnections();
        b.regionDir = ch.regionDir();
        ClusterConfig k = c.cluster();
        b.etcd = k.etcdEndpoints();
        b.nodeId = k.nodeId();
        b.clusterId = k.clusterId();
        b.clusterListen = k.listen();
        b.clusterDataListen = k.dataListen();
        b.clusterTokenFile = k.tokenFile();
        b.clusterTlsCert = k.tlsCert();
        b.clusterTlsKey = k.tlsKey();
        b.clusterTlsCa = k.tlsCa();
        b.clusterLeaseTtlMillis = k.leaseTtlMillis();
        b.clusterLookupTimeoutMillis = k.lookupTimeoutMillis();
        b.catalogReplicas = k.catalogReplicas();
        ManagerConfig.KvEvents kv = c.kvEvents();
        b.kvEventsEndpoint = kv.endpoint();
        b.kvEventsReplayEndpoint = kv.replayEndpoint();
        b.kvEventsReplayBatches = kv.replayBatches();
        b.kvEventsNamedBlocks = kv.namedBlocks();
        b.costObservations = c.cost().observations();
        b.costSelection = c.cost().selection();
        b.costCrossMediumSelection = c.cost().crossMediumSelection();
        return b;
    }

    /**
     * {@code base} with {@code values} (key → JSON value) applied in order.
     *
     * @throws ConfigException naming {@code source} and the key for an unknown key or a bad value
     */
    static ManagerConfig apply(ManagerConfig base, Map<String, JsonNode> values, String source) {
        ConfigBuilder b = of(base);
        boolean explicitReady = false;
        for (Map.Entry<String, JsonNode> e : values.entrySet()) {
            ConfigKeys.Key key = ConfigKeys.KEYS.get(e.getKey());
            if (key == null) {
                throw new ConfigException(source + ": unknown key '" + e.getKey() + "' (known keys: "
                        + String.join(", ", ConfigKeys.KEYS.keySet()) + ")");
            }
            try {
                key.setter().accept(b, e.getValue());
            } catch (IllegalArgumentException | ClassCastException ex) {
                throw new ConfigException(source + ": key '" + e.getKey() + "': " + ex.getMessage());
            }
            explicitReady |= e.getKey().equals("readyFile");
        }
        if (!values.containsKey("stagingBytes") && base.dram().stagingBytes() == base.dram().bytes() / 8) {
            b.stagingBytes = b.dramBytes / 8;
        }
        Path baseSsd = base.ssd().dir();
        if (!explicitReady && !b.ssdDir.equals(baseSsd) && base.endpoints().readyFile().equals(defaultReadyFile(baseSsd))) {
            b.readyFile = defaultReadyFile(b.ssdDir);
        }
        try {
            return b.build();
        } catch (IllegalArgumentException ex) {
            throw new ConfigException(source + ": " + ex.getMessage());
        }
    }

    /**
     * Where the ready line goes unless {@code readyFile} is set: inside the SSD directory, next to
     * {@link ManagerConfig#LOCK_FILE}. That directory belongs to one Manager at a time (the lock),
     * so two Managers never share a default ready file; next to the directory, two stores under
     * one parent ({@code /data/a} and {@code /data/b}) would share {@code /data/manager.ready}.
     */
    static Path defaultReadyFile(Path ssdDir) {
        return ssdDir.normalize().resolve("manager.ready");
    }

    /** The configuration these keys describe; throws IllegalArgumentException naming a bad key. */
    ManagerConfig build() {
        ProtocolLimits limits = ProtocolLimits.DEFAULTS.withMaxFrameBytes(maxFrameBytes)
                .withConnectionBudgets(maxConnections, maxOperationsPerConnection, maxReservationsPerConnection,
                        maxRegionsPerConnection);
        var dram = new ManagerConfig.Dram(dramDir, arenaName, dramBytes, dramSlotBytes, dramEviction, stagingBytes);
        var writes = new ManagerConfig.SsdWrites(ssdPolicy, ssdWriteBytesPerSecond, ssdWriteBurstBytes, ssdWriteQueueBytes);
        var ssd = new ManagerConfig.Ssd(ssdDir, ssdBytes, ssdFiles, ssdIoThreads, ssdBufferedFallback, ssdReadPath, writes);
        var endpoints = new ManagerConfig.Endpoints(socket, socketMode, httpHost, httpPort, readyFile);
        var channel = new ManagerConfig.Channel(limits, outboundQueueFrames, registerTimeoutMillis,
                maxUnregisteredConnections, regionDir);
        var speculation = SpeculationBounds.DEFAULTS
                .withBudgets(prepareInFlightBytes, prepareHeldBytes, prepareSessionInFlightBytes, prepareSessionHeldBytes)
                .withTiming(TimeUnit.MILLISECONDS.toNanos(prepareMarginMillis), TimeUnit.MILLISECONDS.toNanos(prepareGraceMillis),
                        TimeUnit.MILLISECONDS.toNanos(prepareMaxLeadMillis));
        var budgets = new ManagerConfig.Budgets(maxInflightStages, maxLeases, restoreCopyThreads, drainTimeoutMillis,
                publishQuarantineMillis, speculation, hintPinMaxMillis, hintPinnedBytesPerNamespace, tenantQuotas);
        var credentials = new ClusterConfig.Credentials(clusterTokenFile, clusterTlsCert, clusterTlsKey, clusterTlsCa);
        var cluster = new ClusterConfig(etcd, nodeId, clusterId, clusterListen, clusterDataListen, credentials,
                clusterLeaseTtlMillis, clusterLookupTimeoutMillis, catalogReplicas);
        var kvEvents = new ManagerConfig.KvEvents(kvEventsEndpoint, kvEventsReplayEndpoint, kvEventsReplayBatches,
                kvEventsNamedBlocks);
        var cost = new ManagerConfig.Cost(costObservations, costSelection, costCrossMediumSelection);
        return new ManagerConfig(dram, ssd, endpoints, channel, budgets, cluster, kvEvents, cost);
    }
}
