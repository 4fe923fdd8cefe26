package io.orbitkv.core.engine;

import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.core.namespace.NamespaceTable;
import io.orbitkv.core.query.Budget;
import io.orbitkv.core.query.PrepareOperation;
import io.orbitkv.core.query.QueryMetrics;
import io.orbitkv.core.query.QueryPlanner;
import io.orbitkv.core.query.QueryServices;
import io.orbitkv.core.query.RemotePages;
import io.orbitkv.core.query.SessionScope;
import io.orbitkv.core.query.Speculation;
import io.orbitkv.core.storage.TieredStore;
import io.orbitkv.core.storage.dram.ArenaGeometry;
import io.orbitkv.core.transfer.RegionDirectory;
import io.orbitkv.core.transfer.RestoreCopier;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.ProtocolLimits;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;

import java.nio.file.attribute.UserPrincipal;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.function.LongSupplier;

/**
 * The Manager's logic behind the engine channel: opens a {@link ChannelSession} per connection
 * and wires the owners every session shares. Built on a {@link TieredStore} that the caller
 * opened and closes (after this).
 *
 * <p>Who owns what (one hop from here):
 * <ul>
 *   <li>engine instances, epochs, fencing and namespace ids: {@link InstanceTable};
 *   <li>the global lease table and the staging byte budget: two {@link Budget}s, created here from
 *       {@link ManagerBounds} and lent, with the tiers, the planner, the copier, the timers, the
 *       clock and the meters, to every query operation as one {@link QueryServices};
 *   <li>restore copies: {@link RestoreCopier};
 *   <li>the tick thread, timers and the callback threads completions hop to: {@link Housekeeper};
 *   <li>unsealed slots of closed sessions: {@link PublishQuarantine};
 *   <li>meters and the {@code /status} counters: {@link ManagerMetrics}; each namespace's STATS
 *       figures: {@link NamespaceStats}.
 * </ul>
 *
 * <p>Thread model: thread-safe. The session set is concurrent and {@code sessions}' monitor
 * orders opening against the connection bound. I/O completions hop to virtual threads
 * ({@link #callbacks()}) before they take any session lock, so an SSD worker or a copy thread
 * never blocks on a session.
 *
 * <p>Invariants: at most {@code maxConnections} sessions are open; the lease table and the
 * staging budget return to zero when every session has drained.
 */
public final class ManagerCore implements AutoCloseable {

    /** Period of the tick thread that frees quarantined publish slots, in milliseconds. */
    static final long TICK_MILLIS = 100;

    private final TieredStore store;
    private final NamespaceTable namespaces;
    private final ProtocolLimits limits;
    private final ManagerBounds config;
    private final LongSupplier nanoClock;
    private final QueryPlanner planner;
    private final Budget leaseTable;
    private final Budget stagingBudget;
    private final RestoreCopier copier;
    private final PublishQuarantine quarantine;
    private final Housekeeper housekeeper;
    private final HintTable hints;
    private final PageLocator locator;
    private final RemotePages remote;
    private final ManagerMetrics metrics;
    /** What every query operation borrows (built once from the owners above). */
    private final QueryServices queryServices;
    /** PREPARE's speculation budget, held pages and accounting. */
    private final Speculation speculation;
    private final RegionDirectory regions;
    private final Set<EngineSession> sessions = ConcurrentHashMap.newKeySet();
    /**
     * Each namespace's STATS figures, by DRAM namespace id; an entry is made at the namespace's
     * first REGISTER and kept (ids are never reused), so at most the namespace table's
     * {@code maxNamespaces} entries.
     */
    private final ConcurrentHashMap<Integer, NamespaceStats> namespaceStats = new ConcurrentHashMap<>();
    /**
     * The (namespace, key) of every open engine reservation, so one key of a namespace has at most
     * one publisher at a time across all connections (protocol §6.5). One entry per live
     * reservation: at most {@code maxConnections × maxReservationsPerConnection}.
     */
    private final Set<PublishingKey> publishing = ConcurrentHashMap.newKeySet();

    /** A key being published by an engine, in its namespace. */
    private record PublishingKey(int namespaceId, io.orbitkv.state.StateKey key) { }
    private final InstanceTable instances;
    /** PREPAREs from the cluster plane, one Manager-internal owner per namespace. */
    private final RemotePrepares remotePrepares;
    private volatile boolean shuttingDown;

    private volatile PublishObserver publishObserver = PublishObserver.NONE;

    /**
     * @param store      the tiers; opened and closed by the caller, which closes it after this
     * @param namespaces the table the store was opened with (DRAM id ↔ SSD digest)
     * @param limits     the protocol budgets sent in REGISTERED and enforced on the tables
     * @param config     the Manager's own bounds
     * @param registry   where {@code orbitkv.manager.*} meters go
     * @param nanoClock  monotonic clock for drain deadlines
     * @param regions    where REGISTER_REGION may name files (protocol §5.2)
     */
    public ManagerCore(TieredStore store, NamespaceTable namespaces, ProtocolLimits limits, ManagerBounds config,
                       MeterRegistry registry, LongSupplier nanoClock, RegionDirectory regions) {
        this(store, namespaces, limits, config, registry, nanoClock, regions, RemotePages.NONE);
    }

    /** As above, with peer routes: pages only peers hold are fetched through {@code remote}. */
    public ManagerCore(TieredStore store, NamespaceTable namespaces, ProtocolLimits limits, ManagerBounds config,
                       MeterRegistry registry, LongSupplier nanoClock, RegionDirectory regions, RemotePages remote) {
        this.regions = Objects.requireNonNull(regions, "regions");
        this.store = Objects.requireNonNull(store, "store");
        this.namespaces = Objects.requireNonNull(namespaces, "namespaces");
        this.limits = Objects.requireNonNull(limits, "limits");
        this.config = Objects.requireNonNull(config, "config");
        this.nanoClock = Objects.requireNonNull(nanoClock, "nanoClock");
        this.planner = new QueryPlanner(store, remote);
        this.remote = Objects.requireNonNull(remote, "remote");
        this.leaseTable = new Budget("lease table", "leases", config.maxLeases());
        this.stagingBudget = new Budget("staging budget", "bytes", config.stagingBudgetBytes());
        this.copier = new RestoreCopier(config.restoreCopyThreads(), config.restoreQueuedTasks());
        this.metrics = new ManagerMetrics(registry, sessions::size, leaseTable::used, stagingBudget::used,
                leaseTable::capacity, stagingBudget::capacity);
        this.instances = new InstanceTable(namespaces, config, metrics, nanoClock, () -> shuttingDown,
                id -> store.arenasFor(id).isPresent());
        ArenaGeometry geometry = store.dramGeometry();
        this.quarantine = new PublishQuarantine(config.publishQuarantineNanos(), config.publishQuarantineBytes(),
                r -> geometry.arenas().get(r.slotRef().classIndex()).slotBytes(), store::abort);
        this.metrics.quarantine(quarantine::heldBytes, quarantine::heldSlots, quarantine, q -> q.releasedEarly());
        this.housekeeper = new Housekeeper(TICK_MILLIS, nanoClock, registry);
        this.housekeeper.addDuty("publish-quarantine", quarantine::onTick);
        this.housekeeper.addDuty("peer-routes", remote::onTick);
        // prepared pages are pinned in DRAM: at most a quarter of the tier, whatever was configured
        this.speculation = new Speculation(config.speculation().withHeldAtMost(store.dramUsage().capacityBytes() / 4),
                nanoClock);
        this.metrics.speculation(speculation);
        this.housekeeper.addDuty("prepare-resume", now -> resumePrepares());
        this.hints = new HintTable(store, HintBounds.DEFAULTS, nanoClock, registry);
        this.locator = new PageLocator(store, remote, registry);
        this.housekeeper.addDuty("hint-pins", hints::onTick);
        this.queryServices = new QueryServices(store, planner, leaseTable, stagingBudget, copier, housekeeper.callbacks(),
                (task, delayNanos) -> housekeeper.schedule("timer", task, delayNanos), nanoClock,
                new QueryServices.Bounds(config.restoreInlineBytes(), config.stagesPerOperation(), config.maxReplans(),
                        config.peerWaitMaxNanos()), metrics, speculation);
        this.remotePrepares = new RemotePrepares(this, registry);
        this.housekeeper.start();
    }

    /**
     * Time-driven work at {@code nowNanos}: frees quarantined publish slots whose grace ended, then
     * runs the peer routes' duties ({@link RemotePages#onTick}).
     * Called every {@value #TICK_MILLIS} ms by the Manager's tick thread; tests call it with their
     * own clock. Returns how many slots it freed.
     */
    public int onTick(long nowNanos) {
        return (int) housekeeper.tick(nowNanos);
    }

    /**
     * Prepares held back by QUERY stagings resume once none is in flight, highest priority first,
     * on one callback thread (each under its session's lock). Returns how many resumed.
     */
    private long resumePrepares() {
        List<PrepareOperation> resumed = speculation.resumeWaiting(stagingBudget.used() == 0);
        if (resumed.isEmpty()) return 0;
        housekeeper.callbacks().execute(() -> {
            for (PrepareOperation op : resumed) op.resumeLocked();
        });
        return resumed.size();
    }

    /** Failures of background duty (or callback kind) {@code duty} so far; see {@link Housekeeper}. */
    long backgroundErrors(String duty, boolean callback) {
        return housekeeper.errors(duty, callback);
    }

    /** Sets the bounds of HINT (the daemon's configuration); call before the channel accepts connections. */
    public void useHintBounds(HintBounds bounds) {
        hints.bounds(bounds);
    }

    /** Slot bytes {@code namespaceId} holds pinned by HINT PIN now. */
    public long hintPinnedBytes(int namespaceId) {
        return hints.pinnedBytes(namespaceId);
    }

    /** Pages pinned by HINT PIN now, all namespaces. */
    public int hintPins() {
        return hints.pinCount();
    }

    HintTable hints() {
        return hints;
    }

    PageLocator locator() {
        return locator;
    }

    /** Slot bytes held in the publish quarantine (protocol §9.6). */
    public long quarantinedBytes() {
        return quarantine.heldBytes();
    }

    private static List<Reply.ArenaFile> arenaFiles(ArenaGeometry geometry) {
        List<Reply.ArenaFile> out = new ArrayList<>(geometry.arenas().size());
        for (ArenaGeometry.ClassArena a : geometry.arenas()) {
            out.add(new Reply.ArenaFile(a.fileBytes(), a.slotBytes()));
        }
        return List.copyOf(out);
    }

    /**
     * A session for a new connection, or BUSY / SHUTTING_DOWN for the transport to send and close.
     *
     * @param client the connecting process's user as the kernel reports it ({@code SO_PEERCRED});
     *               empty when the transport cannot tell, and then no path region is accepted
     */
    public OpenResult openSession(EventSink sink, Optional<UserPrincipal> client) {
        Objects.requireNonNull(sink, "sink");
        Objects.requireNonNull(client, "client");
        if (shuttingDown) return new OpenResult.Refused(ErrorCode.SHUTTING_DOWN, "the Manager is shutting down");
        synchronized (sessions) {
            if (sessions.size() >= limits.maxConnections()) {
                metrics.busy(ManagerMetrics.Table.CONNECTIONS);
                return new OpenResult.Refused(ErrorCode.BUSY, "maxConnections " + limits.maxConnections() + " reached");
            }
            EngineSession session = new EngineSession(this, sink, client);
            sessions.add(session);
            return new OpenResult.Opened(session);
        }
    }

    /** REGISTER's admission; see {@link InstanceTable#admit}. */
    InstanceTable.Admission admit(EngineSession session, Request.Register r) {
        return instances.admit(session, r);
    }

    void sessionClosed(EngineSession session) {
        sessions.remove(session);
    }

    /** The STATS figures of {@code namespaceId}, made at its first use. */
    NamespaceStats namespaceStats(int namespaceId) {
        return namespaceStats.computeIfAbsent(namespaceId, id -> new NamespaceStats(id, queryServices));
    }

    /**
     * The STATS reply of a session registered in {@code ns}: that namespace's tables and totals only
     * (protocol §6.8); {@link #status()} and the meters keep the Manager-wide figures.
     */
    Reply.StatsReply stats(NamespaceStats ns) {
        long inFlight = 0;
        long held = 0;
        for (EngineSession s : sessions) {
            if (s.namespaceStats() != ns) continue;
            Speculation.SessionBudgets b = s.speculationBudgets();
            inFlight += b.inFlight().used();
            held += b.held().used();
        }
        List<Reply.Counter> c = new ArrayList<>();
        c.add(new Reply.Counter("connections", ns.connections.get()));
        c.add(new Reply.Counter("operations", ns.operations.get()));
        c.add(new Reply.Counter("leases", ns.leases.get()));
        c.add(new Reply.Counter("reservations", ns.reservations.get()));
        c.add(new Reply.Counter("regions", ns.regions.get()));
        c.add(new Reply.Counter("query_hits", ns.queries(QueryMetrics.QueryOutcome.HIT)));
        c.add(new Reply.Counter("query_misses", ns.queries(QueryMetrics.QueryOutcome.MISS)));
        c.add(new Reply.Counter("query_pending", ns.queries(QueryMetrics.QueryOutcome.PENDING)));
        c.add(new Reply.Counter("pages_leased", ns.pagesLeased()));
        c.add(new Reply.Counter("busy_rejections", ns.busy.sum()));
        c.add(new Reply.Counter("restore_bytes", ns.restoreBytes()));
        c.add(new Reply.Counter("dram_used_bytes", store.dram().residentBytes(ns.namespaceId)));
        c.add(new Reply.Counter("dram_capacity_bytes", store.dramUsage().capacityBytes()));
        c.add(new Reply.Counter("prepares", ns.prepares.get()));
        c.add(new Reply.Counter("speculation_inflight_bytes", inFlight));
        c.add(new Reply.Counter("speculation_held_bytes", held));
        c.add(new Reply.Counter("hint_pins", hints.pinCount(ns.namespaceId)));
        c.add(new Reply.Counter("hint_pinned_bytes", hints.pinnedBytes(ns.namespaceId)));
        return new Reply.StatsReply(c);
    }

    /**
     * Sets who learns the names engines give their pages ({@link PublishObserver}); set once by
     * the daemon before the channel accepts connections. Volatile: session threads read it.
     */
    public void observePublishes(PublishObserver observer) {
        publishObserver = Objects.requireNonNull(observer, "observer");
    }

    PublishObserver publishObserver() {
        return publishObserver;
    }

    /** A snapshot for {@code /status}. */
    public ManagerStatus status() {
        List<ManagerStatus.InstanceStatus> list = instances.statuses();
        return new ManagerStatus(store.dramUsage(), store.ssdUsedBytes(), store.ssdCapacityBytes(),
                store.inflightStagings(), list, sessions.size(),
                limits.maxConnections(), metrics.operations.get(), leaseTable.used(), leaseTable.capacity(),
                metrics.reservations.get(), metrics.regions.get(), stagingBudget.used(), stagingBudget.capacity(),
                copier.tasksInFlight(),
                new ManagerStatus.QueryCounts(metrics.queries(QueryMetrics.QueryOutcome.HIT),
                        metrics.queries(QueryMetrics.QueryOutcome.MISS),
                        metrics.queries(QueryMetrics.QueryOutcome.PENDING)),
                metrics.pagesLeased(), metrics.restoreBytes(), metrics.busyTotal(), shuttingDown, metrics.prefixCache());
    }

    /** A snapshot of preparation for {@code /status} (PREPARE, protocol §5.11). */
    public ManagerStatus.Preparation preparation() {
        return new ManagerStatus.Preparation(speculation.prepares(), speculation.heldPages(), speculation.inFlight().used(),
                speculation.inFlight().capacity(), speculation.held().used(), speculation.held().capacity(),
                speculation.busyRefusals(), speculation.accounting().snapshot());
    }

    /**
     * Stops accepting sessions, fences every open one with SHUTTING_DOWN, waits (bounded by
     * {@code fenceDrainTimeoutNanos}) until each drained, then stops the copier and the callback
     * threads and removes the meters. Does not close the {@link TieredStore}. Idempotent.
     */
    @Override
    public void close() {
        if (shuttingDown) return;
        shuttingDown = true;
        List<CompletableFuture<Void>> drains = new ArrayList<>();
        for (EngineSession s : List.copyOf(sessions)) {
            drains.add(s.fence(ErrorCode.SHUTTING_DOWN, "the Manager is shutting down"));
        }
        remotePrepares.close();
        drains.addAll(instances.drains());
        long deadline = nanoClock.getAsLong() + config.fenceDrainTimeoutNanos();
        for (CompletableFuture<Void> d : drains) instances.await(d, Math.max(1, deadline - nanoClock.getAsLong()));
        try {
            copier.close(Math.max(1, deadline - nanoClock.getAsLong()));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        housekeeper.close();
        hints.close();
        quarantine.releaseAll();
        metrics.close();
    }

    // ---- shared with sessions --------------------------------------------------------------

    TieredStore store() {
        return store;
    }

    QueryPlanner planner() {
        return planner;
    }

    QueryServices queryServices() {
        return queryServices;
    }

    /** PREPAREs from the cluster plane (docs/cluster.md "Remote prepare"). */
    public RemotePrepares remotePrepares() {
        return remotePrepares;
    }

    /** The scope of a registered, connected engine session of {@code namespace}, if any. */
    Optional<SessionScope> registeredScope(NamespaceDigest namespace) {
        if (shuttingDown) return Optional.empty();
        for (EngineSession s : sessions) {
            Optional<SessionScope> scope = s.registeredScope();
            if (scope.isPresent() && scope.get().digest().equals(namespace)) return scope;
        }
        return Optional.empty();
    }

    /** PREPARE's shared state (budgets, held pages, accounting). */
    public Speculation speculation() {
        return speculation;
    }

    RestoreCopier copier() {
        return copier;
    }

    /** Claims {@code key} of {@code namespaceId} for one engine reservation; false if another holds it. */
    boolean startPublishing(int namespaceId, io.orbitkv.state.StateKey key) {
        return publishing.add(new PublishingKey(namespaceId, key));
    }

    /** Ends the claim of {@link #startPublishing} (the reservation was committed, aborted, refused or quarantined). */
    void endPublishing(int namespaceId, io.orbitkv.state.StateKey key) {
        publishing.remove(new PublishingKey(namespaceId, key));
    }

    /** Takes an unsealed reservation of a session that is closing; frees its slot after the grace. */
    void quarantine(io.orbitkv.core.storage.dram.Reservation reservation) {
        quarantine.hold(reservation, nanoClock.getAsLong());
    }

    Executor callbacks() {
        return housekeeper.callbacks();
    }

    ManagerMetrics metrics() {
        return metrics;
    }

    private volatile DescriptorHandoff handoff = new InProcessHandoff();

    /** The protocol budgets this Manager enforces and announces. */
    public ProtocolLimits limits() {
        return limits;
    }

    /** Where REGISTER_REGION may name files. */
    RegionDirectory regions() {
        return regions;
    }

    /**
     * The arenas REGISTERED announces to an engine of {@code namespaceId}, in arena-index order:
     * that namespace's and no other's. Empty when it has none and none can be made (admission
     * refuses such a REGISTER first).
     */
    public java.util.Optional<List<Reply.ArenaFile>> arenaFiles(int namespaceId) {
        return store.arenasFor(namespaceId).map(ManagerCore::arenaFiles);
    }

    /**
     * The tier's own descriptors of {@code namespaceId}'s arenas, in arena-index order, borrowed
     * (valid while the Manager is open; never closed by the caller); what a session offers through
     * the {@link #descriptorHandoff()}.
     */
    int[] arenaDescriptors(int namespaceId) {
        return store.arenasFor(namespaceId).orElseThrow().arenas().stream()
                .mapToInt(ArenaGeometry.ClassArena::descriptor).toArray();
    }

    /**
     * Makes {@code handoff} (the transport's descriptor socket) the way sessions registered from now
     * on receive their arena descriptors; until then an {@link InProcessHandoff} serves clients in
     * this JVM only.
     */
    public void useDescriptorHandoff(DescriptorHandoff handoff) {
        this.handoff = Objects.requireNonNull(handoff, "handoff");
    }

    /** How sessions hand descriptors to their clients (protocol §6.11). */
    public DescriptorHandoff descriptorHandoff() {
        return handoff;
    }
}
