package io.orbitkv.server.daemon;

import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.orbitkv.core.cost.CostObserver;
import io.orbitkv.core.catalog.Member;
import io.orbitkv.core.catalog.MembershipView;
import io.orbitkv.core.engine.ManagerCore;
import io.orbitkv.core.engine.ManagerStatus;
import io.orbitkv.core.namespace.NamespaceTable;
import io.orbitkv.core.query.RemotePages;
import io.orbitkv.core.fd.OwnerOnly;
import io.orbitkv.core.storage.TieredStore;
import io.orbitkv.core.transfer.RegionDirectory;
import io.orbitkv.core.fd.Posix;
import io.orbitkv.server.channel.ChannelServer;
import io.orbitkv.server.channel.DescriptorServer;
import io.orbitkv.server.cluster.ClusterNode;
import io.orbitkv.server.cluster.ClusterSecurity;
import io.orbitkv.server.cluster.PrepareService;
import io.orbitkv.server.config.ManagerConfig;
import io.orbitkv.server.events.KvEventPublisher;
import io.orbitkv.server.http.ManagerRegistry;
import io.orbitkv.server.http.StatusHistory;
import io.orbitkv.server.http.StatusServer;
import io.orbitkv.server.log.Logging;
import io.orbitkv.server.log.RecentErrors;
import io.orbitkv.server.peer.ClusterPeers;
import java.io.IOException;
import java.io.PrintWriter;
import java.util.logging.Level;
import java.util.logging.Logger;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * A running single-node Manager: the store lock, the tiered store, the Manager logic, the
 * engine channel and the HTTP endpoint. {@link #start} opens them in this order: the store lock,
 * the DRAM lock, the tiered store, the cluster (when configured), the Manager logic, the KV event
 * endpoints (when configured), the descriptor socket, the engine channel, the status history and
 * HTTP. {@link #close()} stops them in the order below, which is not the exact reverse.
 *
 * <p>Owns every one of those resources, the ready file and two locks: the store's
 * ({@code <ssdDir>/manager.lock}) and the DRAM arenas' ({@code <dramDir>/<arenaName>.lock}), so
 * a second Manager with the same DRAM directory never starts beside a live one even when only
 * that directory is shared; a socket a live Manager answers on is refused before any tier opens.
 * Thread model: {@link #start} and {@link #close()} run on the lifecycle thread (the CLI's main
 * thread, or the signal handler's); {@code close()} is idempotent and synchronized. Invariants:
 * nothing is started unless both locks are held; the ready line is printed (and the ready file
 * written, {@link #announceReady}) only once everything serves; after {@code close()} the socket
 * files, the ready file and the lock files are gone, the arenas are unmapped and their
 * descriptors closed, and the locks are released.
 *
 * <p>Shutdown order and why ({@link #close()}, one log line per step; a step that fails is
 * logged and the next one runs):
 * (1) leave the cluster, when in one: revoke the etcd lease (or leave it to expire when etcd is
 * unreachable), close the cluster and bulk endpoints and free the peer tickets, so peers stop
 * planning reads from this Manager before its pages go;
 * (2) stop accepting and close every connection, which closes its session (cancel operations,
 * quarantine unsealed reservations, drain their I/O), so no engine I/O is running;
 * (3) close the descriptor socket;
 * (4) stop HTTP and the status history;
 * (5) close the KV event endpoints, when configured;
 * (6) close the Manager logic: fence any session still open, drain restore copies, release the
 * publish quarantine;
 * (7) close the tiered store, which drains queued and in-flight SSD work (bounded by
 * {@code drainTimeoutMillis}) before unmapping the arenas;
 * (8) remove the ready file, release the DRAM lock and remove the DRAM directory if it is empty;
 * (9) release the store lock last, so a second Manager can never open the store while this one
 * still writes to it.
 */
public final class ManagerDaemon implements AutoCloseable {

    /** What {@link #start} found. */
    public sealed interface Startup {
        /** The Manager serves. */
        record Started(ManagerDaemon daemon) implements Startup {
        }

        /** Another process holds {@code lockFile} (its pid, when readable); nothing was started. */
        record Locked(Path lockFile, Optional<Long> holderPid) implements Startup {
        }
    }

    private static final Logger LOG = Logger.getLogger(ManagerDaemon.class.getName());

    private final ManagerConfig config;
    private final StoreLock lock;
    private final StoreLock dramLock;
    private final TieredStore store;
    private final ManagerCore core;
    private final ChannelServer channel;
    private final DescriptorServer descriptors;
    private final StatusServer http;
    private final Optional<ClusterPeers> peers;
    private final Optional<ClusterNode> cluster;
    private final StatusHistory history;
    private final Optional<KvEventPublisher> kvEvents;
    private final String readyLine;
    private boolean closed;

    private ManagerDaemon(ManagerConfig config, StoreLock lock, StoreLock dramLock, TieredStore store,
                          ManagerCore core, ChannelServer channel, DescriptorServer descriptors, StatusServer http,
                          Optional<ClusterPeers> peers, StatusHistory history, Optional<KvEventPublisher> kvEvents) {
        this.config = config;
        this.lock = lock;
        this.dramLock = dramLock;
        this.store = store;
        this.core = core;
        this.channel = channel;
        this.descriptors = descriptors;
        this.http = http;
        this.peers = peers;
        this.cluster = peers.map(ClusterPeers::node);
        this.history = history;
        this.kvEvents = kvEvents;
        this.readyLine = "orbitkv manager ready socket=" + channel.socketPath().toAbsolutePath()
                + " http=" + http.address() + cluster.map(c -> " " + c.readyFragment()).orElse("")
                + " pid=" + ProcessHandle.current().pid();
    }

    /**
     * Takes the locks and starts everything; on failure releases what was started and rethrows.
     *
     * @throws IOException if a file, the socket or the HTTP port cannot be set up
     * @throws io.orbitkv.server.config.ConfigException if the cluster token file is refused
     *                     (before any lock or store is opened)
     */
    public static Startup start(ManagerConfig config) throws IOException {
        // a refused cluster token is a configuration error found before any file is touched or
        // the SSD store recovered (ClusterNode reads it again when it joins)
        if (config.cluster().enabled()) ClusterSecurity.load(config.cluster());
        makeUndumpable(System.getenv());
        Optional<StoreLock> acquired = StoreLock.tryAcquire(config.lockFile());
        if (acquired.isEmpty()) {
            return new Startup.Locked(config.lockFile(), StoreLock.holderPid(config.lockFile()));
        }
        StoreLock lock = acquired.get();
        Path dramLockFile = config.dram().dir().resolve(config.dram().arenaName() + ".lock");
        Optional<StoreLock> dramAcquired;
        try {
            dramAcquired = StoreLock.tryAcquire(dramLockFile);
            if (dramAcquired.isPresent()) ChannelServer.removeIfStale(config.endpoints().socket());
        } catch (IOException | RuntimeException e) {
            lock.close();
            throw e;
        }
        if (dramAcquired.isEmpty()) {
            lock.close();
            return new Startup.Locked(dramLockFile, StoreLock.holderPid(dramLockFile));
        }
        StoreLock dramLock = dramAcquired.get();
        PrometheusMeterRegistry registry = ManagerRegistry.create();
        TieredStore store = null;
        ManagerCore core = null;
        ChannelServer channel = null;
        DescriptorServer descriptors = null;
        ClusterPeers peers = null;
        PrepareService prepares = null;
        StatusHistory history = null;
        KvEventPublisher kvEvents = null;
        try {
            NamespaceTable namespaces = new NamespaceTable(NAMESPACES);
            // costObservations turns cost observations on; costSelection and costCrossMediumSelection
            // layer guarded selection on them (docs/operations.md; ORBITKV_COST_* are their aliases)
            CostObserver cost = CostObserver.create(config.cost().costConfig(), config.cost().selectionConfig(),
                    registry, System::nanoTime);
            store = TieredStore.open(config.storeConfig(), namespaces, registry, cost);
            // the cluster (and its peer service) before the Manager logic, which plans peer routes through it
            if (config.cluster().enabled()) {
                prepares = new PrepareService(registry);
                peers = ClusterPeers.start(config.cluster(), config.ssd().dir(), store, namespaces, registry, System::nanoTime,
                        List.of(prepares));
                peers.node().describe();
            }
            RemotePages remote = peers == null ? RemotePages.NONE : peers.routes();
            core = new ManagerCore(store, namespaces, config.channel().limits(), config.coreBounds(), registry, System::nanoTime,
                    regionDirectory(config), remote);
            core.useHintBounds(config.budgets().hintBounds());
            if (prepares != null) prepares.serve(core); // remote prepares (docs/cluster.md "Remote prepare")
            // KV events before the channel accepts: every REGISTER and publish of this run is named
            if (config.kvEvents().enabled()) {
                kvEvents = KvEventPublisher.start(config.kvEvents().settings(), store.residency(), registry);
                core.observePublishes(kvEvents);
            }
            // the descriptor socket before the channel: every REGISTERED names it (protocol §6.11)
            descriptors = DescriptorServer.start(config.descriptorSettings(), registry, System::nanoTime);
            core.useDescriptorHandoff(descriptors);
            channel = ChannelServer.start(config.channelSettings(), core::openSession, registry);
            ManagerCore statusCore = core;
            TieredStore statusStore = store;
            Optional<ClusterPeers> statusPeers = Optional.ofNullable(peers);
            history = StatusHistory.start(() -> sample(statusCore.status()));
            StatusHistory statusHistory = history;
            RecentErrors errors = Logging.recentErrors();
            long startedNanos = System.nanoTime();
            StatusServer http = StatusServer.start(config.endpoints().httpHost(), config.endpoints().httpPort(), registry, () -> {
                Map<String, Object> body = StatusWithCost.compose(statusCore.status(), cost.status(),
                        statusPeers.map(p -> p.routes().status()));
                statusPeers.ifPresent(p -> body.put("cluster", ClusterStatus.of(p.node())));
                body.put("retention", statusStore.retention().snapshot());
                body.put("prepare", statusCore.preparation());
                body.put("tenants", statusStore.dram().tenantUsage());
                body.put("uptimeSeconds", (System.nanoTime() - startedNanos) / 1e9);
                body.put("history", statusHistory.snapshot());
                body.put("recentErrors", new ErrorsStatus(errors.total(), errors.snapshot()));
                return body;
            });
            return new Startup.Started(new ManagerDaemon(config, lock, dramLock, store, core, channel, descriptors, http,
                    Optional.ofNullable(peers), history, Optional.ofNullable(kvEvents)));
        } catch (IOException | RuntimeException e) {
            if (history != null) history.close();
            if (kvEvents != null) kvEvents.close();
            if (peers != null) peers.close();
            if (channel != null) channel.close();
            if (descriptors != null) descriptors.close();
            if (core != null) core.close();
            if (store != null) store.close();
            dramLock.close();
            lock.close();
            throw e;
        }
    }

    /**
     * Makes this process non-dumpable ({@code prctl(PR_SET_DUMPABLE, 0)}) unless
     * {@code ORBITKV_DUMPABLE=1}: its {@code /proc/<pid>/fd/*} links become root's, so a process of
     * the Manager's own user cannot open an arena descriptor by number (protocol §9.6); it also stops
     * same-user {@code ptrace}, core dumps and same-user {@code jcmd} (which reaches the JVM through
     * {@code /proc/<pid>/}): set the variable where those are needed (operations.md). Done before
     * any arena exists.
     */
    static void makeUndumpable(Map<String, String> env) {
        if ("1".equals(env.get("ORBITKV_DUMPABLE"))) {
            LOG.info("ORBITKV_DUMPABLE=1: the Manager stays dumpable; processes of its user can open its descriptors");
            return;
        }
        int r = Posix.makeUndumpable();
        if (r < 0) LOG.warning("prctl(PR_SET_DUMPABLE, 0) failed: errno " + -r + "; /proc/<pid>/fd stays open to this user");
    }

    /** The prefix-cache totals of {@code s} as a history sample taken now. */
    private static StatusHistory.Sample sample(ManagerStatus s) {
        ManagerStatus.PrefixCache p = s.prefixCache();
        return new StatusHistory.Sample(System.currentTimeMillis(), p.queriedTokens(), p.hitTokens().dram(),
                p.hitTokens().ssd(), p.hitTokens().peer(), p.hitBytes().total(), p.restoredBytes().total());
    }

    /** {@code /status}'s {@code recentErrors}: WARN/ERROR events since start and the last ones kept. */
    record ErrorsStatus(long total, List<RecentErrors.Event> events) {
    }

    /** {@code /status}'s {@code cluster}: this member, whether its view is valid, and the live members. */
    record ClusterStatus(Member self, boolean valid, String invalidReason, List<Member> live) {
        static ClusterStatus of(ClusterNode node) {
            MembershipView view = node.view();
            return new ClusterStatus(node.self(), view.valid(), view.invalidReason(), view.live());
        }
    }

    /** Namespaces the store's table can hold (each a few dozen bytes). */
    static final int NAMESPACES = 4096;

    /** The line printed once the Manager serves: socket path, HTTP address, pid. */
    public String readyLine() {
        return readyLine;
    }

    /** The cluster membership, when this Manager joined one. */
    public Optional<ClusterNode> cluster() {
        return cluster;
    }

    /** The bound HTTP port. */
    public int httpPort() {
        return http.port();
    }

    /**
     * Announces that the Manager serves: writes the ready file, then prints the ready line on
     * {@code out}. Called by the owner once it can also stop the Manager cleanly (signal handlers
     * installed), so nobody signals a Manager that would not drain.
     *
     * @throws IOException if the ready file cannot be written
     */
    public void announceReady(PrintWriter out) throws IOException {
        writeReadyFile();
        out.println(readyLine);
        out.flush();
    }

    /**
     * The region directory, created {@code 0700} if missing (engines of other users then need a
     * directory they can write: {@code /dev/shm}, the default, or one made for them); the SSD and
     * DRAM directories are never region files' homes.
     */
    private static RegionDirectory regionDirectory(ManagerConfig config) throws IOException {
        OwnerOnly.createDirectories(config.channel().regionDir());
        return RegionDirectory.of(config.channel().regionDir(), List.of(config.dram().dir(), config.ssd().dir()));
    }

    private void writeReadyFile() throws IOException {
        Path ready = config.endpoints().readyFile();
        Path parent = ready.toAbsolutePath().getParent();
        if (parent != null) OwnerOnly.createDirectories(parent);
        Path tmp = ready.resolveSibling(ready.getFileName() + ".tmp");
        OwnerOnly.writeString(tmp, readyLine + "\n");
        try {
            Files.move(tmp, ready, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } catch (AtomicMoveNotSupportedException e) {
            Files.move(tmp, ready, StandardCopyOption.REPLACE_EXISTING);
        }
    }

    /** Drains and stops everything (see the class note for the order), logging each step. Idempotent. */
    @Override
    public synchronized void close() {
        if (closed) return;
        closed = true;
        long t0 = System.nanoTime();
        int connections = channel.connections();
        peers.ifPresent(p -> step(() -> "left the cluster (" + switch (p.node().leave()) {
            case LEASE_REVOKED -> "lease revoked";
            case LEASE_LEFT_TO_EXPIRE -> "etcd unreachable: lease left to expire after its TTL";
            case NO_LEASE -> "held no lease";
            case NOT_LEFT -> "membership still open";
        } + ", cluster endpoint closed, peer tickets freed)", p::close));
        step("stopped accepting and closed " + connections + " connection(s) (sessions drained)", channel::close);
        step("closed the descriptor socket " + descriptors.socketPath(), descriptors::close);
        step("stopped HTTP " + http.address(), () -> {
            http.close();
            history.close();
        });
        kvEvents.ifPresent(k -> step("closed the KV event endpoints " + config.kvEvents().endpoint(), k::close));
        step("closed the Manager logic", core::close);
        step("closed the tiers (SSD work drained, arena files removed)", store::close);
        step("removed " + config.endpoints().readyFile(), () -> Files.deleteIfExists(config.endpoints().readyFile()));
        step("released " + dramLock.file(), dramLock::close);
        step("removed the DRAM directory if empty", this::removeEmptyDramDir);
        step("released " + lock.file(), lock::close);
        LOG.info("stopped in " + (System.nanoTime() - t0) / 1_000_000 + " ms");
    }

    private void removeEmptyDramDir() throws IOException {
        try (var entries = Files.list(config.dram().dir())) {
            if (entries.findAny().isEmpty()) Files.deleteIfExists(config.dram().dir());
        }
    }

    @FunctionalInterface
    private interface Step {
        void run() throws Exception;
    }

    private void step(String done, Step step) {
        step(() -> done, step);
    }

    /** As above, with the line built after the step ran (it reports what the step found). */
    private void step(java.util.function.Supplier<String> done, Step step) {
        try {
            step.run();
            LOG.info(done.get());
        } catch (Exception e) {
            LOG.log(Level.WARNING, "shutdown step failed (" + done.get() + "): " + e
                    + "; files it would have removed may be left behind, and the next start replaces them");
        }
    }
}
