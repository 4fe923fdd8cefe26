package io.orbitkv.server.config;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.TextNode;
import io.orbitkv.core.storage.TieredStoreConfig;
import io.orbitkv.core.storage.dram.DramEviction;
import io.orbitkv.core.storage.dram.DramTierConfig;
import io.orbitkv.core.storage.dram.SizeClass;
import io.orbitkv.core.storage.publish.PublishConfig;
import io.orbitkv.core.storage.publish.SsdAdmissionPolicy;
import io.orbitkv.core.storage.ssd.ReadPath;
import io.orbitkv.core.storage.ssd.SsdConfig;
import io.orbitkv.server.channel.ChannelServer;
import io.orbitkv.state.protocol.ProtocolLimits;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.function.BiConsumer;

/**
 * Everything a single-node Manager needs to start: where its tiers, socket and HTTP endpoint
 * live, how big they are, and its budgets. Built from embedded {@link #defaults()}, then a JSON
 * file ({@link #withJson}), then command-line overrides ({@link #withOverrides}); each layer
 * names keys of the one table {@link #KEYS}, documented in {@code docs/operations.md}.
 *
 * <p>Immutable value. Invariant: a {@code ManagerConfig} always converts to a valid
 * {@link TieredStoreConfig} and {@link ProtocolLimits} (checked in the constructor), so a bad
 * value is refused when the file is read, with the key's name, not when a tier opens.
 *
 * <p>Design note: the file and the command line go through the same key table (a key's setter
 * takes a JSON node; a command-line value arrives as a text node), so an override can never mean
 * something different from the same key in a file, and unknown keys are refused in both places
 * (a misspelt {@code ssdByte} silently ignored would leave a 4 GiB default in place). Sizes accept
 * a number or a string with a binary suffix ({@link ByteSize}).
 *
 * @param dramDir                directory of the DRAM arena files (shared memory: {@code /dev/shm/...})
 * @param arenaName              file name stem of the arena files, {@code [A-Za-z0-9_-]{1,64}}
 * @param dramBytes              bytes of DRAM slots in all size classes together
 * @param dramSlotBytes          slot sizes, strictly increasing multiples of 4 KiB
 * @param dramEviction           which resident image a full DRAM tier evicts ({@code w-tinylfu} or {@code lru})
 * @param stagingBytes           DRAM bytes that may be reserved and not yet committed (publishes, SSD stagings);
 *                               also the query staging budget; follows {@code dramBytes / 8} unless set
 * @param ssdDir                 directory of the SSD extent files and of {@code manager.lock}
 * @param ssdBytes               bytes of SSD extent files in all
 * @param ssdFiles               number of extent ring files
 * @param ssdIoThreads           SSD worker threads (also the in-flight I/O bound)
 * @param ssdBufferedFallback    use buffered I/O where the file system refuses O_DIRECT (tmpfs, overlayfs)
 * @param ssdReadPath            SSD read route: positional, uring (fails to start without io_uring) or auto
 * @param ssdPolicy              when a DRAM-resident page is written to SSD
 * @param ssdWriteBytesPerSecond SSD write budget, bytes per second
 * @param ssdWriteBurstBytes     SSD write budget's burst, bytes
 * @param ssdWriteQueueBytes     bytes admitted for SSD and not yet written
 * @param maxInflightStages      distinct keys being staged from SSD at once
 * @param maxLeases              pages leased to all operations of all sessions at once (global lease table)
 * @param restoreCopyThreads     platform threads copying leased pages into engine regions (RESTORE)
 * @param socket                 path of the engine channel's Unix socket
 * @param socketMode             permissions of the socket file, {@code 0600} or {@code 0660}
 * @param httpHost               address the HTTP endpoint binds
 * @param httpPort               HTTP port; 0 picks a free one
 * @param readyFile              file the Manager writes its ready line to once serving
 * @param regionDir              the only directory whose files REGISTER_REGION accepts (protocol §5.2): a
 *                               regular file in it owned by the connecting client's uid, outside
 *                               {@code dramDir} and {@code ssdDir}
 * @param limits                 the engine channel's budgets (sent to clients in REGISTERED)
 * @param outboundQueueFrames    COMPLETION frames queued per connection before events are dropped
 * @param drainTimeoutMillis     how long shutdown waits for sessions and SSD work to drain
 * @param registerTimeoutMillis  how long a connection may stay unregistered before ERROR REGISTER_TIMEOUT (protocol §9.1)
 * @param maxUnregisteredConnections connections not yet REGISTERED at once; 0 = {@code maxConnections / 8}, at least 1
 * @param publishQuarantineMillis how long a closed or fenced session's unsealed publish slots are held
 *                               before they are freed (protocol §9.6); 0 frees them at once
 * @param cluster                etcd membership, cluster endpoint and catalog; single-node when no etcd is set
 * @param kvEvents               the KV event publisher ({@code docs/kv-events.md}); off unless an endpoint is set
 */
public record ManagerConfig(
        Path dramDir,
        String arenaName,
        long dramBytes,
        List<Integer> dramSlotBytes,
        DramEviction dramEviction,
        long stagingBytes,
        Path ssdDir,
        long ssdBytes,
        int ssdFiles,
        int ssdIoThreads,
        boolean ssdBufferedFallback,
        ReadPath ssdReadPath,
        SsdAdmissionPolicy ssdPolicy,
        long ssdWriteBytesPerSecond,
        long ssdWriteBurstBytes,
        long ssdWriteQueueBytes,
        int maxInflightStages,
        long maxLeases,
        int restoreCopyThreads,
        Path socket,
        String socketMode,
        String httpHost,
        int httpPort,
        Path readyFile,
        Path regionDir,
        ProtocolLimits limits,
        int outboundQueueFrames,
        long drainTimeoutMillis,
        long registerTimeoutMillis,
        int maxUnregisteredConnections,
        long publishQuarantineMillis,
        ClusterConfig cluster,
        KvEvents kvEvents) {

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
                new io.orbitkv.server.events.KvEventPublisher.Settings(endpoint, replayEndpoint, replayBatches, namedBlocks, 1024);
            } else if (replayBatches < 1 || namedBlocks < 1) {
                throw new IllegalArgumentException("kvEventsReplayBatches and kvEventsNamedBlocks must be >= 1");
            }
        }

        public boolean enabled() {
            return !endpoint.isEmpty();
        }

        /** The publisher's settings (validates the endpoints). */
        public io.orbitkv.server.events.KvEventPublisher.Settings settings() {
            return new io.orbitkv.server.events.KvEventPublisher.Settings(endpoint, replayEndpoint, replayBatches,
                    namedBlocks, 1024);
        }
    }

    /** Default working directory of a Manager, relative to where it starts. */
    public static final Path VAR_DIR = Path.of("var", "orbitkv");
    /** Default HTTP port (the Prometheus exporter convention range). */
    public static final int DEFAULT_HTTP_PORT = 9464;
    /**
     * Default {@link #regionDir}: {@code /dev/shm}, the shared-memory mount engines already keep
     * their regions on. It is world-writable and sticky, so an engine of any user can create its
     * region there and none can replace another's; the owner check admits only the client's own
     * files, and the Manager's arena directory inside it is excluded.
     */
    public static final Path DEFAULT_REGION_DIR = Path.of("/dev/shm");
    /** Name of the lock file inside {@link #ssdDir}. */
    public static final String LOCK_FILE = "manager.lock";
    /**
     * Reads configuration files: JSON plus {@code //} and {@code /* *}{@code /} comments and a
     * trailing comma, so an example file can explain every key and a user can uncomment any line
     * of it (plain JSON has neither).
     */
    private static final ObjectMapper FILE_MAPPER = JsonMapper.builder()
            .enable(JsonReadFeature.ALLOW_JAVA_COMMENTS, JsonReadFeature.ALLOW_TRAILING_COMMA).build();

    public ManagerConfig {
        Objects.requireNonNull(dramDir, "dramDir");
        Objects.requireNonNull(arenaName, "arenaName");
        dramSlotBytes = List.copyOf(dramSlotBytes);
        Objects.requireNonNull(dramEviction, "dramEviction");
        Objects.requireNonNull(ssdDir, "ssdDir");
        Objects.requireNonNull(ssdPolicy, "ssdPolicy");
        Objects.requireNonNull(ssdReadPath, "ssdReadPath");
        Objects.requireNonNull(socket, "socket");
        Objects.requireNonNull(httpHost, "httpHost");
        Objects.requireNonNull(readyFile, "readyFile");
        Objects.requireNonNull(regionDir, "regionDir");
        for (Path own : List.of(dramDir, ssdDir)) {
            Path r = regionDir.toAbsolutePath().normalize();
            if (r.startsWith(own.toAbsolutePath().normalize())) {
                throw new IllegalArgumentException("regionDir " + regionDir + " must not lie inside the Manager's own "
                        + own + ": a region there could name the Manager's own files");
            }
        }
        Objects.requireNonNull(limits, "limits");
        Objects.requireNonNull(cluster, "cluster");
        Objects.requireNonNull(kvEvents, "kvEvents");
        if (!socketMode.equals("0600") && !socketMode.equals("0660")) {
            throw new IllegalArgumentException("socketMode must be 0600 or 0660: " + socketMode);
        }
        if (httpPort < 0 || httpPort > 65_535) throw new IllegalArgumentException("httpPort must be 0..65535: " + httpPort);
        if (outboundQueueFrames < 1) throw new IllegalArgumentException("outboundQueueFrames must be >= 1");
        if (drainTimeoutMillis < 1) throw new IllegalArgumentException("drainTimeoutMillis must be >= 1");
        if (registerTimeoutMillis < 1) throw new IllegalArgumentException("registerTimeoutMillis must be >= 1");
        if (maxUnregisteredConnections < 0 || maxUnregisteredConnections > limits.maxConnections()) {
            throw new IllegalArgumentException("maxUnregisteredConnections must be in [0, maxConnections = "
                    + limits.maxConnections() + "] (0 = maxConnections / 8): " + maxUnregisteredConnections);
        }
        if (publishQuarantineMillis < 0) throw new IllegalArgumentException("publishQuarantineMillis must be >= 0");
        if (ssdFiles < 1) throw new IllegalArgumentException("ssdFiles must be >= 1: " + ssdFiles);
        if (socket.toString().getBytes(java.nio.charset.StandardCharsets.UTF_8).length > 107) {
            throw new IllegalArgumentException("socket path is longer than the 107 bytes a Unix socket allows: " + socket);
        }
        storeConfig(dramDir, arenaName, dramBytes, dramSlotBytes, dramEviction, stagingBytes, ssdDir, ssdBytes, ssdFiles,
                ssdIoThreads, ssdBufferedFallback, ssdReadPath, ssdPolicy, ssdWriteBytesPerSecond, ssdWriteBurstBytes,
                ssdWriteQueueBytes, maxInflightStages, drainTimeoutMillis);
        coreBounds(maxLeases, stagingBytes, restoreCopyThreads, drainTimeoutMillis, publishQuarantineMillis);
    }

    /**
     * The Manager logic's bounds: {@code maxLeases}, {@code restoreCopyThreads}, the query staging
     * budget (the same {@code stagingBytes} the DRAM tier may hold reserved: a staging reserves
     * its slot there), the fence drain bound ({@code drainTimeoutMillis}) and the publish
     * quarantine ({@code publishQuarantineMillis}); the rest are the
     * core's defaults.
     */
    public io.orbitkv.core.engine.ManagerBounds coreBounds() {
        return coreBounds(maxLeases, stagingBytes, restoreCopyThreads, drainTimeoutMillis, publishQuarantineMillis);
    }

    private static io.orbitkv.core.engine.ManagerBounds coreBounds(long maxLeases, long stagingBytes,
            int restoreCopyThreads, long drainTimeoutMillis, long publishQuarantineMillis) {
        io.orbitkv.core.engine.ManagerBounds d = io.orbitkv.core.engine.ManagerBounds.DEFAULTS;
        return new io.orbitkv.core.engine.ManagerBounds(maxLeases, stagingBytes, d.stagesPerOperation(),
                restoreCopyThreads, Math.max(d.restoreQueuedTasks(), restoreCopyThreads), d.restoreInlineBytes(), d.maxInstances(),
                d.maxReplans(), java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(drainTimeoutMillis),
                java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(publishQuarantineMillis), d.publishQuarantineBytes(),
                d.peerWaitMaxNanos(), d.reconnectGraceNanos());
    }

    /**
     * The embedded defaults: 1 GiB of DRAM in {@code /dev/shm/orbitkv-<user>}, 4 GiB of SSD under
     * {@code ./var/orbitkv/ssd}, write-through SSD admission at up to 1 GiB/s, socket
     * {@code ./var/orbitkv/manager.sock} (0600), HTTP on 127.0.0.1:9464, protocol limits of
     * {@code docs/protocol.md}.
     */
    public static ManagerConfig defaults() {
        String user = System.getProperty("user.name", "user").replaceAll("[^A-Za-z0-9_-]", "_");
        Path ssd = VAR_DIR.resolve("ssd");
        return new ManagerConfig(Path.of("/dev/shm", "orbitkv-" + user), "manager", 1L << 30,
                DramTierConfig.DEFAULT_SLOT_BYTES, DramEviction.LRU, (1L << 30) / 8, ssd, 4L << 30, 4, 4, true, ReadPath.AUTO,
                new SsdAdmissionPolicy.WriteThrough(), 1L << 30, 64L << 20, 256L << 20, 256,
                io.orbitkv.core.engine.ManagerBounds.DEFAULTS.maxLeases(),
                io.orbitkv.core.engine.ManagerBounds.DEFAULTS.restoreCopyThreads(), VAR_DIR.resolve("manager.sock"), "0600", "127.0.0.1", DEFAULT_HTTP_PORT,
                defaultReadyFile(ssd), DEFAULT_REGION_DIR, ProtocolLimits.DEFAULTS, 1024, 10_000,
                ChannelServer.Settings.DEFAULT_REGISTER_TIMEOUT.toMillis(), 0,
                java.util.concurrent.TimeUnit.NANOSECONDS.toMillis(
                        io.orbitkv.core.engine.ManagerBounds.DEFAULTS.publishQuarantineNanos()),
                ClusterConfig.SINGLE_NODE, KvEvents.OFF);
    }

    /** The engine channel's settings: socket, limits, queues and the registration policy (protocol §9.1). */
    public ChannelServer.Settings channelSettings() {
        return new ChannelServer.Settings(socket, socketMode, limits, outboundQueueFrames,
                Duration.ofMillis(drainTimeoutMillis), Duration.ofMillis(registerTimeoutMillis),
                maxUnregisteredConnections == 0
                        ? ChannelServer.Settings.defaultMaxUnregistered(limits.maxConnections())
                        : maxUnregisteredConnections);
    }

    /**
     * The descriptor socket beside the channel socket ({@code <socket>.fd}, protocol §6.11), with
     * the channel socket's mode and one ticket place per connection.
     */
    public io.orbitkv.server.channel.DescriptorServer.Settings descriptorSettings() {
        return new io.orbitkv.server.channel.DescriptorServer.Settings(
                io.orbitkv.server.channel.DescriptorServer.Settings.besideChannel(socket), socketMode,
                limits.maxConnections(), io.orbitkv.server.channel.DescriptorServer.Settings.DEFAULT_TICKET_TTL,
                io.orbitkv.server.channel.DescriptorServer.Settings.DEFAULT_EXCHANGE_TIMEOUT);
    }

    /** The tiered store this configuration describes. */
    public TieredStoreConfig storeConfig() {
        return storeConfig(dramDir, arenaName, dramBytes, dramSlotBytes, dramEviction, stagingBytes, ssdDir, ssdBytes, ssdFiles,
                ssdIoThreads, ssdBufferedFallback, ssdReadPath, ssdPolicy, ssdWriteBytesPerSecond, ssdWriteBurstBytes,
                ssdWriteQueueBytes, maxInflightStages, drainTimeoutMillis);
    }

    /** The lock file that keeps two Managers off one store. */
    public Path lockFile() {
        return ssdDir.resolve(LOCK_FILE);
    }

    /**
     * DRAM slots: the largest class gets half of {@code dramBytes}, the others share the rest
     * equally (pages of a 7-8B model at 16 tokens are ~2 MiB; smaller classes serve small models
     * and recurrent checkpoints).
     */
    private static TieredStoreConfig storeConfig(Path dramDir, String arenaName, long dramBytes, List<Integer> slotBytes,
            DramEviction eviction,
            long stagingBytes, Path ssdDir, long ssdBytes, int ssdFiles, int ssdIoThreads, boolean bufferedFallback,
            ReadPath readPath, SsdAdmissionPolicy policy, long writeBytesPerSecond, long writeBurstBytes, long writeQueueBytes,
            int maxInflightStages, long drainTimeoutMillis) {
        if (slotBytes.isEmpty()) throw new IllegalArgumentException("dramSlotBytes needs at least one size");
        if (slotBytes.size() > io.orbitkv.state.unix.UnixSocket.MAX_DESCRIPTORS_PER_MESSAGE) {
            // an engine receives one arena descriptor per class in one SCM_RIGHTS message (protocol 6.11)
            throw new IllegalArgumentException("dramSlotBytes has " + slotBytes.size() + " sizes; at most "
                    + io.orbitkv.state.unix.UnixSocket.MAX_DESCRIPTORS_PER_MESSAGE
                    + " (one arena descriptor per size goes to an engine in one message)");
        }
        List<SizeClass> classes = new ArrayList<>();
        for (int i = 0; i < slotBytes.size(); i++) {
            long share = slotBytes.size() == 1 ? dramBytes
                    : i == slotBytes.size() - 1 ? dramBytes / 2 : dramBytes / 2 / (slotBytes.size() - 1);
            long count = share / slotBytes.get(i);
            if (count < 1 || count > Integer.MAX_VALUE) {
                throw new IllegalArgumentException("dramBytes " + ByteSize.format(dramBytes) + " gives "
                        + count + " slots of " + ByteSize.format(slotBytes.get(i)) + " (need >= 1)");
            }
            classes.add(new SizeClass(slotBytes.get(i), (int) count));
        }
        long capacity = classes.stream().mapToLong(SizeClass::capacityBytes).sum();
        // stagingBytes is the DRAM tier's reservation budget (reservedBudgetBytes): checked here so
        // the message names the keys a user sets, not the tier's internal names.
        long largestSlot = slotBytes.getLast();
        if (stagingBytes < largestSlot) {
            throw new IllegalArgumentException("stagingBytes " + ByteSize.format(stagingBytes) + " (default dramBytes / 8)"
                    + " must hold one page of the largest dramSlotBytes class (" + ByteSize.format(largestSlot)
                    + "): raise stagingBytes to at least " + ByteSize.format(largestSlot) + ", or dramBytes to at least "
                    + ByteSize.format(8 * largestSlot) + " with the default stagingBytes, or lower the largest slot");
        }
        if (stagingBytes + capacity / 8 >= capacity) {
            throw new IllegalArgumentException("stagingBytes " + ByteSize.format(stagingBytes) + " must be below 7/8 of"
                    + " the DRAM slot capacity (" + ByteSize.format(capacity) + " from dramBytes " + ByteSize.format(dramBytes)
                    + "; the other eighth is kept for evicted pages still being read): lower stagingBytes or raise dramBytes");
        }
        DramTierConfig dram = new DramTierConfig(dramDir, arenaName, classes, stagingBytes, capacity / 8,
                DramTierConfig.DEFAULT_PRESSURE_SCAN_ENTRIES, eviction);
        long fileBytes = ssdBytes / ssdFiles / 4096 * 4096;
        long largestExtent = io.orbitkv.core.storage.ssd.ExtentLayout.footprintBytes(slotBytes.getLast());
        if (largestExtent > fileBytes) {
            throw new IllegalArgumentException("ssdBytes " + ByteSize.format(ssdBytes) + " over ssdFiles " + ssdFiles
                    + " gives ring files of " + ByteSize.format(fileBytes) + ", too small for one page of the largest"
                    + " dramSlotBytes class (" + ByteSize.format(slotBytes.getLast()) + " + its extent header): raise"
                    + " ssdBytes, or lower ssdFiles or the largest slot");
        }
        // the payload bound first: a ring file is checked against it, and the default (2 MiB) would
        // refuse a small file that the configured slots fit
        SsdConfig ssd = SsdConfig.of(ssdDir).withMaxPayloadBytes(slotBytes.getLast()).withFiles(ssdFiles, fileBytes)
                .withIo(ssdIoThreads, 256)
                .withBufferedFallback(bufferedFallback).withReadPath(readPath);
        PublishConfig d = PublishConfig.defaults(policy);
        PublishConfig publish = new PublishConfig(d.sealQueueBytes(), d.sealQueueEntries(), policy, writeBytesPerSecond,
                writeBurstBytes, writeQueueBytes, d.readLaneOps(), d.writeLaneOps(), d.maxReadsWhileWriteWaits(),
                d.hitTableEntries(), java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(drainTimeoutMillis),
                d.ssdRefreshFraction());
        return new TieredStoreConfig(dram, ssd, publish, 65_536, maxInflightStages);
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
        return apply(values, file.toString());
    }

    /** This configuration with {@code overrides} (key → text, e.g. {@code dramBytes → 512m}) applied. */
    public ManagerConfig withOverrides(Map<String, String> overrides) {
        Map<String, JsonNode> values = new LinkedHashMap<>();
        overrides.forEach((k, v) -> values.put(k, TextNode.valueOf(v)));
        return apply(values, "command line");
    }

    private ManagerConfig apply(Map<String, JsonNode> values, String source) {
        Builder b = new Builder(this);
        Path explicitReady = null;
        for (Map.Entry<String, JsonNode> e : values.entrySet()) {
            Key key = KEYS.get(e.getKey());
            if (key == null) {
                throw new ConfigException(source + ": unknown key '" + e.getKey() + "' (known keys: "
                        + String.join(", ", KEYS.keySet()) + ")");
            }
            try {
                key.setter().accept(b, e.getValue());
            } catch (IllegalArgumentException | ClassCastException ex) {
                throw new ConfigException(source + ": key '" + e.getKey() + "': " + ex.getMessage());
            }
            if (e.getKey().equals("readyFile")) explicitReady = b.readyFile;
        }
        if (!values.containsKey("stagingBytes") && stagingBytes == dramBytes / 8) b.stagingBytes = b.dramBytes / 8;
        if (explicitReady == null && !b.ssdDir.equals(ssdDir) && readyFile.equals(defaultReadyFile(ssdDir))) {
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
     * {@link #LOCK_FILE}. That directory belongs to one Manager at a time (the lock), so two
     * Managers never share a default ready file; next to the directory, two stores under one
     * parent ({@code /data/a} and {@code /data/b}) shared {@code /data/manager.ready} and each
     * Manager's stop removed the other's line.
     */
    static Path defaultReadyFile(Path ssdDir) {
        return ssdDir.normalize().resolve("manager.ready");
    }

    /** One configuration key: its name, what it means (for errors and docs) and how it is set. */
    public record Key(String name, String meaning, BiConsumer<Builder, JsonNode> setter) {
    }

    /** Every key a file or an override may name, in documentation order. */
    public static final Map<String, Key> KEYS = keys();

    private static Map<String, Key> keys() {
        List<Key> list = List.of(
                new Key("dramDir", "directory of the DRAM lock file (arenas are memfds)", (b, v) -> b.dramDir = path(v)),
                new Key("arenaName", "name stem of the DRAM lock file and arena memfds", (b, v) -> b.arenaName = text(v)),
                new Key("dramBytes", "bytes of DRAM slots (size)", (b, v) -> b.dramBytes = size(v)),
                new Key("dramSlotBytes", "slot sizes (array of sizes)", (b, v) -> b.dramSlotBytes = sizes(v)),
                new Key("dramEviction", "DRAM eviction policy: w-tinylfu or lru",
                        (b, v) -> b.dramEviction = DramEviction.parse(text(v))),
                new Key("stagingBytes", "DRAM reserved but not yet committed (size)", (b, v) -> b.stagingBytes = size(v)),
                new Key("ssdDir", "directory of the SSD store and manager.lock", (b, v) -> b.ssdDir = path(v)),
                new Key("ssdBytes", "bytes of SSD extent files (size)", (b, v) -> b.ssdBytes = size(v)),
                new Key("ssdFiles", "number of SSD ring files", (b, v) -> b.ssdFiles = integer(v)),
                new Key("ssdIoThreads", "SSD worker threads", (b, v) -> b.ssdIoThreads = integer(v)),
                new Key("ssdBufferedFallback", "buffered I/O where O_DIRECT is refused",
                        (b, v) -> b.ssdBufferedFallback = bool(v)),
                new Key("ssdReadPath", "SSD read route: positional, uring or auto",
                        (b, v) -> b.ssdReadPath = ReadPath.parse(text(v))),
                new Key("ssdPolicy", "write-through, on-evict, reuse-aware[:N]",
                        (b, v) -> b.ssdPolicy = SsdAdmissionPolicy.parse(text(v))),
                new Key("ssdWriteBytesPerSecond", "SSD write budget (size per second)",
                        (b, v) -> b.ssdWriteBytesPerSecond = size(v)),
                new Key("ssdWriteBurstBytes", "SSD write burst (size)", (b, v) -> b.ssdWriteBurstBytes = size(v)),
                new Key("ssdWriteQueueBytes", "SSD writes admitted, not yet written (size)",
                        (b, v) -> b.ssdWriteQueueBytes = size(v)),
                new Key("maxInflightStages", "keys staged from SSD at once", (b, v) -> b.maxInflightStages = integer(v)),
                new Key("maxLeases", "global lease table entries", (b, v) -> b.maxLeases = size(v)),
                new Key("restoreCopyThreads", "restore copy threads", (b, v) -> b.restoreCopyThreads = integer(v)),
                new Key("socket", "engine channel socket path", (b, v) -> b.socket = path(v)),
                new Key("socketMode", "socket permissions, 0600 or 0660", (b, v) -> b.socketMode = text(v)),
                new Key("httpHost", "HTTP bind address", (b, v) -> b.httpHost = text(v)),
                new Key("httpPort", "HTTP port, 0 = any free port", (b, v) -> b.httpPort = integer(v)),
                new Key("readyFile", "file the ready line is written to", (b, v) -> b.readyFile = path(v)),
                new Key("regionDir", "the only directory REGISTER_REGION files may be in (client-owned files only)",
                        (b, v) -> b.regionDir = path(v)),
                new Key("maxFrameBytes", "largest frame (size)", (b, v) -> b.limits[0] = Math.toIntExact(size(v))),
                new Key("maxConnections", "client connections at once", (b, v) -> b.limits[9] = integer(v)),
                new Key("maxOperationsPerConnection", "live operations per connection",
                        (b, v) -> b.limits[10] = integer(v)),
                new Key("maxReservationsPerConnection", "live publish reservations per connection",
                        (b, v) -> b.limits[11] = integer(v)),
                new Key("maxRegionsPerConnection", "destination regions per connection",
                        (b, v) -> b.limits[12] = integer(v)),
                new Key("outboundQueueFrames", "COMPLETION frames queued per connection",
                        (b, v) -> b.outboundQueueFrames = integer(v)),
                new Key("drainTimeoutMillis", "shutdown drain bound, ms", (b, v) -> b.drainTimeoutMillis = size(v)),
                new Key("registerTimeoutMillis", "how long a connection may stay unregistered, ms",
                        (b, v) -> b.registerTimeoutMillis = size(v)),
                new Key("maxUnregisteredConnections", "connections not yet registered at once; 0 = maxConnections / 8",
                        (b, v) -> b.maxUnregisteredConnections = integer(v)),
                new Key("publishQuarantineMillis", "how long a closed session's unsealed publish slots are held, ms",
                        (b, v) -> b.publishQuarantineMillis = size(v)),
                new Key("etcd", "etcd client URLs, comma-separated; empty = single-node",
                        (b, v) -> b.etcd = text(v).isBlank() ? List.of() : List.of(text(v).strip().split("\\s*,\\s*"))),
                new Key("nodeId", "this node's stable name in the cluster", (b, v) -> b.nodeId = text(v)),
                new Key("clusterId", "cluster name (etcd prefix, auth header)", (b, v) -> b.clusterId = text(v)),
                new Key("clusterListen", "cluster gRPC address host:port", (b, v) -> b.clusterListen = text(v)),
                new Key("clusterDataListen", "bulk data plane address host:port; empty = cluster host, any port",
                        (b, v) -> b.clusterDataListen = text(v)),
                new Key("clusterTokenFile", "file holding the cluster token", (b, v) -> b.clusterTokenFile = Optional.of(path(v))),
                new Key("clusterTlsCert", "certificate chain for mutual TLS (PEM)", (b, v) -> b.clusterTlsCert = Optional.of(path(v))),
                new Key("clusterTlsKey", "PKCS#8 private key for mutual TLS (PEM)", (b, v) -> b.clusterTlsKey = Optional.of(path(v))),
                new Key("clusterTlsCa", "CA bundle peers must chain to (PEM)", (b, v) -> b.clusterTlsCa = Optional.of(path(v))),
                new Key("clusterLeaseTtlMillis", "etcd lease TTL, ms (>= 2000)", (b, v) -> b.clusterLeaseTtlMillis = size(v)),
                new Key("clusterLookupTimeoutMillis", "catalog lookup batch deadline, ms",
                        (b, v) -> b.clusterLookupTimeoutMillis = size(v)),
                new Key("kvEventsEndpoint", "KV events PUB address tcp://host:port; empty = off",
                        (b, v) -> b.kvEventsEndpoint = text(v).strip()),
                new Key("kvEventsReplayEndpoint", "KV events replay ROUTER address tcp://host:port; empty = none",
                        (b, v) -> b.kvEventsReplayEndpoint = text(v).strip()),
                new Key("kvEventsReplayBatches", "KV event batches kept for replay",
                        (b, v) -> b.kvEventsReplayBatches = integer(v)),
                new Key("kvEventsNamedBlocks", "engine block names kept for KV events",
                        (b, v) -> b.kvEventsNamedBlocks = integer(v)));
        Map<String, Key> map = new LinkedHashMap<>();
        for (Key k : list) map.put(k.name(), k);
        return java.util.Collections.unmodifiableMap(map);
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
        if (!v.isArray()) {
            List<Integer> out = new ArrayList<>();
            for (String part : text(v).split(",")) out.add(Math.toIntExact(ByteSize.parse(part)));
            return out;
        }
        List<Integer> out = new ArrayList<>();
        for (JsonNode n : v) out.add(Math.toIntExact(size(n)));
        return out;
    }

    /** Mutable copy used while one layer of keys is applied; confined to {@link #apply}. */
    public static final class Builder {
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
        final int[] limits;
        int outboundQueueFrames;
        long drainTimeoutMillis;
        long registerTimeoutMillis;
        int maxUnregisteredConnections;
        long publishQuarantineMillis;
        List<String> etcd;
        String nodeId;
        String clusterId;
        String clusterListen;
        String clusterDataListen;
        Optional<Path> clusterTokenFile;
        Optional<Path> clusterTlsCert;
        Optional<Path> clusterTlsKey;
        Optional<Path> clusterTlsCa;
        long clusterLeaseTtlMillis;
        long clusterLookupTimeoutMillis;
        String kvEventsEndpoint;
        String kvEventsReplayEndpoint;
        int kvEventsReplayBatches;
        int kvEventsNamedBlocks;

        private Builder(ManagerConfig c) {
            dramDir = c.dramDir;
            arenaName = c.arenaName;
            dramBytes = c.dramBytes;
            dramSlotBytes = c.dramSlotBytes;
            dramEviction = c.dramEviction;
            stagingBytes = c.stagingBytes;
            ssdDir = c.ssdDir;
            ssdBytes = c.ssdBytes;
            ssdFiles = c.ssdFiles;
            ssdIoThreads = c.ssdIoThreads;
            ssdBufferedFallback = c.ssdBufferedFallback;
            ssdReadPath = c.ssdReadPath;
            ssdPolicy = c.ssdPolicy;
            ssdWriteBytesPerSecond = c.ssdWriteBytesPerSecond;
            ssdWriteBurstBytes = c.ssdWriteBurstBytes;
            ssdWriteQueueBytes = c.ssdWriteQueueBytes;
            maxInflightStages = c.maxInflightStages;
            maxLeases = c.maxLeases;
            restoreCopyThreads = c.restoreCopyThreads;
            socket = c.socket;
            socketMode = c.socketMode;
            httpHost = c.httpHost;
            httpPort = c.httpPort;
            readyFile = c.readyFile;
            regionDir = c.regionDir;
            ProtocolLimits l = c.limits;
            limits = new int[] {l.maxFrameBytes(), l.maxGroupsPerQuery(), l.maxPagesPerQuery(), l.maxPagesPerPublish(),
                l.maxIdsPerSettle(), l.maxPagesPerRestore(), l.maxArenaFiles(), l.maxStatsCounters(),
                l.maxStringBytes(), l.maxConnections(), l.maxOperationsPerConnection(),
                l.maxReservationsPerConnection(), l.maxRegionsPerConnection()};
            outboundQueueFrames = c.outboundQueueFrames;
            drainTimeoutMillis = c.drainTimeoutMillis;
            registerTimeoutMillis = c.registerTimeoutMillis;
            maxUnregisteredConnections = c.maxUnregisteredConnections;
            publishQuarantineMillis = c.publishQuarantineMillis;
            ClusterConfig k = c.cluster;
            etcd = k.etcdEndpoints();
            nodeId = k.nodeId();
            clusterId = k.clusterId();
            clusterListen = k.listen();
            clusterDataListen = k.dataListen();
            clusterTokenFile = k.tokenFile();
            clusterTlsCert = k.tlsCert();
            clusterTlsKey = k.tlsKey();
            clusterTlsCa = k.tlsCa();
            clusterLeaseTtlMillis = k.leaseTtlMillis();
            clusterLookupTimeoutMillis = k.lookupTimeoutMillis();
            kvEventsEndpoint = c.kvEvents.endpoint();
            kvEventsReplayEndpoint = c.kvEvents.replayEndpoint();
            kvEventsReplayBatches = c.kvEvents.replayBatches();
            kvEventsNamedBlocks = c.kvEvents.namedBlocks();
        }

        private ManagerConfig build() {
            ProtocolLimits l = new ProtocolLimits(limits[0], limits[1], limits[2], limits[3], limits[4], limits[5],
                    limits[6], limits[7], limits[8], limits[9], limits[10], limits[11], limits[12]);
            return new ManagerConfig(dramDir, arenaName, dramBytes, dramSlotBytes, dramEviction, stagingBytes, ssdDir, ssdBytes,
                    ssdFiles, ssdIoThreads, ssdBufferedFallback, ssdReadPath, ssdPolicy, ssdWriteBytesPerSecond, ssdWriteBurstBytes,
                    ssdWriteQueueBytes, maxInflightStages, maxLeases, restoreCopyThreads, socket, socketMode, httpHost,
                    httpPort, readyFile, regionDir, l,
                    outboundQueueFrames, drainTimeoutMillis, registerTimeoutMillis, maxUnregisteredConnections,
                    publishQuarantineMillis,
                    new ClusterConfig(etcd, nodeId, clusterId, clusterListen, clusterTokenFile, clusterTlsCert,
                            clusterTlsKey, clusterTlsCa, clusterLeaseTtlMillis, clusterLookupTimeoutMillis, clusterDataListen),
                    new KvEvents(kvEventsEndpoint, kvEventsReplayEndpoint, kvEventsReplayBatches, kvEventsNamedBlocks));
        }
    }
}
