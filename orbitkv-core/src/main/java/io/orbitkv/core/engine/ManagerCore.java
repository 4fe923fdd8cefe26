package io.orbitkv.core.engine;

import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.core.query.Budget;
import io.orbitkv.core.query.OperationHost;
import io.orbitkv.core.query.QueryPlanner;
import io.orbitkv.core.query.RemotePages;
import io.orbitkv.core.query.SessionScope;
import io.orbitkv.core.storage.NamespaceTable;
import io.orbitkv.core.storage.TieredStore;
import io.orbitkv.core.storage.dram.ArenaGeometry;
import io.orbitkv.core.storage.ssd.NamespaceDigest;
import io.orbitkv.core.transfer.RestoreCopier;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.ProtocolLimits;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.OptionalInt;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;

/**
 * The Manager's logic behind the engine channel: opens a {@link ChannelSession} per connection,
 * keeps the engine instances and their epochs, maps namespaces to the DRAM tier's ids, and owns
 * the global lease table, the staging byte budget and the restore copier that every session
 * shares. Built on a {@link TieredStore} that the caller opened and closes (after this).
 *
 * <p>Thread model: thread-safe. {@code instancesLock} guards the instance table and namespace
 * allocation; it may be held while taking a session's lock, never the other way round (sessions
 * report closing through a concurrent set). Fencing and drain waits happen without it. I/O
 * completions hop to virtual threads ({@link #callbacks()}) before they take any session lock,
 * so an SSD worker or a copy thread never blocks on a session.
 *
 * <p>Invariants: at most {@code maxConnections} sessions are open; per instance id, the record
 * holds the highest epoch ever admitted and at most one open session; the lease table and the
 * staging budget return to zero when every session has drained.
 *
 * <p>Design note: REGISTER of a higher epoch fences the old incarnation and answers only after
 * its drain (protocol §9.2), bounded by {@code fenceDrainTimeoutNanos} (30 s default: a drain
 * waits for at most 64 in-flight 2 MiB SSD reads per operation and a few copies, milliseconds in
 * practice); past that the REGISTER is answered BUSY and may be retried with the same epoch.
 */
public final class ManagerCore implements AutoCloseable {

    /** Period of the tick thread that frees quarantined publish slots, in milliseconds. */
    static final long TICK_MILLIS = 100;
    /**
     * How long a REGISTER with the epoch of a still-connected incarnation waits for that
     * connection's close to be processed before it is refused STALE_EPOCH, in nanoseconds.
     */
    static final long RECONNECT_GRACE_NANOS = TimeUnit.MILLISECONDS.toNanos(250);

    private final TieredStore store;
    private final NamespaceTable namespaces;
    private final ProtocolLimits limits;
    private final ManagerConfig config;
    private final LongSupplier nanoClock;
    private final QueryPlanner planner;
    private final Budget leaseTable;
    private final Budget stagingBudget;
    private final RestoreCopier copier;
    private final ExecutorService callbacks = Executors.newVirtualThreadPerTaskExecutor();
    private final PublishQuarantine quarantine;
    private final ScheduledExecutorService ticker;
    private final RemotePages remote;
    private final ManagerMetrics metrics;
    private final List<Reply.ArenaFile> arenaFiles;
    private final Set<EngineSession> sessions = ConcurrentHashMap.newKeySet();
    private final Object instancesLock = new Object();
    private final Map<String, Instance> instances = new LinkedHashMap<>();
    private final AtomicLong incarnations = new AtomicLong();
    private volatile boolean shuttingDown;

    /** The highest admitted epoch of one instance id and the session that holds it. */
    private static final class Instance {
        long epoch;
        long incarnationId;
        EngineSession session;
        /** The drain the admitted session waits for before REGISTERED (kept for a retried REGISTER). */
        CompletableFuture<Void> predecessorDrain = CompletableFuture.completedFuture(null);
    }

    /** Outcome of {@link #admit}: the session's scope, or the ERROR answering its REGISTER. */
    sealed interface Admission {
        record Admitted(SessionScope scope, long incarnationId) implements Admission {
        }

        record Refused(Reply.Error error) implements Admission {
        }
    }

    /** One pass of {@link #admit}: decided, or wait for the same epoch's previous connection to close. */
    private sealed interface Decision {
        record Decided(Admission admission) implements Decision {
        }

        record WaitForClose(EngineSession previous) implements Decision {
        }
    }

    /**
     * @param store      the tiers; opened and closed by the caller, which closes it after this
     * @param namespaces the table the store was opened with (DRAM id ↔ SSD digest)
     * @param limits     the protocol budgets sent in REGISTERED and enforced on the tables
     * @param config     the Manager's own bounds
     * @param registry   where {@code orbitkv.manager.*} meters go
     * @param nanoClock  monotonic clock for drain deadlines
     */
    public ManagerCore(TieredStore store, NamespaceTable namespaces, ProtocolLimits limits, ManagerConfig config,
                       MeterRegistry registry, LongSupplier nanoClock) {
        this(store, namespaces, limits, config, registry, nanoClock, RemotePages.NONE);
    }

    /** As above, with peer routes: pages only peers hold are fetched through {@code remote} (issue 6). */
    public ManagerCore(TieredStore store, NamespaceTable namespaces, ProtocolLimits limits, ManagerConfig config,
                       MeterRegistry registry, LongSupplier nanoClock, RemotePages remote) {
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
        this.arenaFiles = arenaFiles(store.dram().geometry());
        ArenaGeometry geometry = store.dram().geometry();
        this.quarantine = new PublishQuarantine(config.publishQuarantineNanos(), config.publishQuarantineBytes(),
                r -> geometry.arenas().get(r.slotRef().classIndex()).slotBytes(), store.dram()::abort);
        this.metrics.quarantine(quarantine::heldBytes, quarantine::heldSlots, quarantine, q -> q.releasedEarly());
        this.ticker = Executors.newSingleThreadScheduledExecutor(
                Thread.ofPlatform().daemon().name("orbitkv-manager-tick").factory());
        this.ticker.scheduleWithFixedDelay(() -> onTick(this.nanoClock.getAsLong()), TICK_MILLIS, TICK_MILLIS,
                TimeUnit.MILLISECONDS);
    }

    /**
     * Time-driven work at {@code nowNanos}: frees quarantined publish slots whose grace ended, then
     * runs the peer routes' duties ({@link RemotePages#onTick}).
     * Called every {@value #TICK_MILLIS} ms by the Manager's tick thread; tests call it with their
     * own clock. Returns how many slots it freed.
     */
    public int onTick(long nowNanos) {
        int freed = quarantine.onTick(nowNanos);
        try {
            remote.onTick(nowNanos);
        } catch (RuntimeException e) {
            // a peer duty failing must not stop the tick thread (scheduleWithFixedDelay would cancel it)
        }
        return freed;
    }

    /** Slot bytes held in the publish quarantine (protocol §9.6). */
    public long quarantinedBytes() {
        return quarantine.heldBytes();
    }

    private static List<Reply.ArenaFile> arenaFiles(ArenaGeometry geometry) {
        List<Reply.ArenaFile> out = new ArrayList<>(geometry.arenas().size());
        for (ArenaGeometry.ClassArena a : geometry.arenas()) {
            out.add(new Reply.ArenaFile(a.path(), a.fileBytes(), a.slotBytes()));
        }
        return List.copyOf(out);
    }

    /** A session for a new connection, or BUSY / SHUTTING_DOWN for the transport to send and close. */
    public OpenResult openSession(EventSink sink) {
        Objects.requireNonNull(sink, "sink");
        if (shuttingDown) return new OpenResult.Refused(ErrorCode.SHUTTING_DOWN, "the Manager is shutting down");
        synchronized (sessions) {
            if (sessions.size() >= limits.maxConnections()) {
                metrics.busy(ManagerMetrics.Table.CONNECTIONS);
                return new OpenResult.Refused(ErrorCode.BUSY, "maxConnections " + limits.maxConnections() + " reached");
            }
            EngineSession session = new EngineSession(this, sink);
            sessions.add(session);
            return new OpenResult.Opened(session);
        }
    }

    /**
     * Admits a REGISTER (protocol §9.2): refuses a lower epoch, or the same epoch while that
     * incarnation is connected; fences a connected lower epoch and waits for its drain; waits too
     * for a disconnected predecessor that is still draining. A same-epoch REGISTER whose previous
     * connection still looks open first waits up to {@link #RECONNECT_GRACE_NANOS} for that
     * connection's close (a reconnect racing the old reader's EOF), then decides again.
     */
    Admission admit(EngineSession session, Request.Register r) {
        EngineSession previous;
        switch (decide(session, r, true)) {
            case Decision.Decided(Admission admission) -> {
                return admission;
            }
            case Decision.WaitForClose(EngineSession p) -> previous = p;
        }
        // Same epoch while the previous connection looks open: a client that closed its socket
        // and reconnected at once usually arrives before its old reader has seen EOF. Wait a
        // bounded time for that close; a connection that is really still open stays and wins.
        await(previous.closedSignal(), RECONNECT_GRACE_NANOS);
        metrics.reconnectWaits.increment();
        return switch (decide(session, r, false)) {
            case Decision.Decided(Admission admission) -> admission;
            case Decision.WaitForClose ignored -> refused(ErrorCode.STALE_EPOCH, "instance " + r.instanceId()
                    + " is registered with epoch " + r.epoch() + " and connected");
        };
    }

    /**
     * One admission decision under {@code instancesLock}; with {@code mayWait}, a same-epoch
     * REGISTER while the incarnation is still connected answers {@link Decision.WaitForClose}
     * instead of STALE_EPOCH.
     */
    private Decision decide(EngineSession session, Request.Register r, boolean mayWait) {
        if (shuttingDown) return refuse(ErrorCode.SHUTTING_DOWN, "the Manager is shutting down");
        EngineSession toFence = null;
        CompletableFuture<Void> predecessorDrain = CompletableFuture.completedFuture(null);
        SessionScope scope;
        long incarnationId;
        synchronized (instancesLock) {
            OptionalInt namespaceId = namespaceId(NamespaceDigest.ofBytes(r.namespace().digest()));
            if (namespaceId.isEmpty()) {
                metrics.busy(ManagerMetrics.Table.NAMESPACES);
                return refuse(ErrorCode.BUSY, "the namespace table is full");
            }
            Instance instance = instances.get(r.instanceId());
            if (instance == null) {
                if (instances.size() >= config.maxInstances() && !dropDisconnectedInstance()) {
                    metrics.busy(ManagerMetrics.Table.INSTANCES);
                    return refuse(ErrorCode.BUSY, "the instance table is full");
                }
                instance = new Instance();
                instances.put(r.instanceId(), instance);
            } else if (instance.session != session) {
                boolean connected = instance.session != null && instance.session.isOpen();
                if (mayWait && connected && r.epoch() == instance.epoch) {
                    return new Decision.WaitForClose(instance.session);
                }
                if (r.epoch() < instance.epoch || (r.epoch() == instance.epoch && connected)) {
                    return refuse(ErrorCode.STALE_EPOCH, "instance " + r.instanceId()
                            + " is registered with epoch " + instance.epoch + (connected ? " and connected" : "")
                            + "; got epoch " + r.epoch());
                }
                if (instance.session != null) {
                    if (connected) toFence = instance.session;
                    predecessorDrain = instance.session.drained();
                }
            } else if (r.epoch() != instance.epoch) {
                return refuse(ErrorCode.STALE_EPOCH, "a retried REGISTER must repeat epoch " + instance.epoch);
            } else {
                predecessorDrain = instance.predecessorDrain;
            }
            instance.predecessorDrain = predecessorDrain;
            instance.epoch = r.epoch();
            instance.session = session;
            instance.incarnationId = incarnations.incrementAndGet();
            incarnationId = instance.incarnationId;
            scope = new SessionScope(r.namespace(), namespaceId.getAsInt(), r.contract());
        }
        if (toFence != null) {
            toFence.fence(ErrorCode.STALE_EPOCH, "instance " + r.instanceId() + " registered with higher epoch "
                    + r.epoch());
        }
        if (!await(predecessorDrain, config.fenceDrainTimeoutNanos())) {
            metrics.busy(ManagerMetrics.Table.INSTANCES);
            return refuse(ErrorCode.BUSY, "the previous incarnation of " + r.instanceId()
                    + " is still draining; retry REGISTER with the same epoch");
        }
        return new Decision.Decided(new Admission.Admitted(scope, incarnationId));
    }

    private static Decision refuse(ErrorCode code, String message) {
        return new Decision.Decided(refused(code, message));
    }

    private static Admission refused(ErrorCode code, String message) {
        return new Admission.Refused(new Reply.Error(code, message));
    }

    /** The DRAM id of {@code digest}, registering the next free id; empty when the table is full. */
    private OptionalInt namespaceId(NamespaceDigest digest) {
        OptionalInt known = namespaces.id(digest);
        if (known.isPresent()) return known;
        for (int id = 0; id < Integer.MAX_VALUE; id++) {
            switch (namespaces.register(id, digest)) {
                case REGISTERED, ALREADY_REGISTERED -> {
                    return OptionalInt.of(id);
                }
                case CONFLICT -> {
                    OptionalInt raced = namespaces.id(digest);
                    if (raced.isPresent()) return raced;
                }
                case FULL -> {
                    return OptionalInt.empty();
                }
            }
        }
        return OptionalInt.empty();
    }

    private boolean dropDisconnectedInstance() {
        for (Iterator<Instance> it = instances.values().iterator(); it.hasNext(); ) {
            Instance i = it.next();
            if (i.session == null || (!i.session.isOpen() && i.session.drained().isDone())) {
                it.remove();
                return true;
            }
        }
        return false;
    }

    private boolean await(CompletableFuture<Void> drain, long timeoutNanos) {
        long deadline = nanoClock.getAsLong() + timeoutNanos;
        try {
            drain.get(Math.max(0, deadline - nanoClock.getAsLong()), TimeUnit.NANOSECONDS);
            return true;
        } catch (TimeoutException e) {
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        } catch (ExecutionException e) {
            throw new IllegalStateException("a session drain failed", e.getCause());
        }
    }

    void sessionClosed(EngineSession session) {
        sessions.remove(session);
    }

    /** The STATS reply: current tables and totals. */
    Reply.StatsReply stats() {
        List<Reply.Counter> c = new ArrayList<>();
        c.add(new Reply.Counter("connections", sessions.size()));
        c.add(new Reply.Counter("operations", metrics.operations.get()));
        c.add(new Reply.Counter("leases", leaseTable.used()));
        c.add(new Reply.Counter("reservations", metrics.reservations.get()));
        c.add(new Reply.Counter("regions", metrics.regions.get()));
        c.add(new Reply.Counter("staging_bytes", stagingBudget.used()));
        c.add(new Reply.Counter("query_hits", metrics.queries(OperationHost.QueryOutcome.HIT)));
        c.add(new Reply.Counter("query_misses", metrics.queries(OperationHost.QueryOutcome.MISS)));
        c.add(new Reply.Counter("query_pending", metrics.queries(OperationHost.QueryOutcome.PENDING)));
        c.add(new Reply.Counter("pages_leased", metrics.pagesLeased()));
        c.add(new Reply.Counter("busy_rejections", metrics.busyTotal()));
        c.add(new Reply.Counter("restore_bytes", metrics.restoreBytes()));
        c.add(new Reply.Counter("dram_used_bytes", store.dram().usage().usedBytes()));
        c.add(new Reply.Counter("dram_capacity_bytes", store.dram().usage().capacityBytes()));
        return new Reply.StatsReply(c);
    }

    /** The Manager's monotonic clock, as given to the constructor (nanoseconds). */
    long nanoTime() {
        return nanoClock.getAsLong();
    }

    /** A snapshot for {@code /status}. */
    public ManagerStatus status() {
        List<ManagerStatus.InstanceStatus> list = new ArrayList<>();
        synchronized (instancesLock) {
            instances.forEach((id, i) -> list.add(new ManagerStatus.InstanceStatus(id, i.epoch, i.incarnationId,
                    i.session != null && i.session.isOpen())));
        }
        return new ManagerStatus(store.dram().usage(), store.ssd().usedBytes(), store.ssd().capacityBytes(),
                store.inflightStagings(), list, sessions.size(),
                limits.maxConnections(), metrics.operations.get(), leaseTable.used(), leaseTable.capacity(),
                metrics.reservations.get(), metrics.regions.get(), stagingBudget.used(), stagingBudget.capacity(),
                copier.tasksInFlight(),
                new ManagerStatus.QueryCounts(metrics.queries(OperationHost.QueryOutcome.HIT),
                        metrics.queries(OperationHost.QueryOutcome.MISS),
                        metrics.queries(OperationHost.QueryOutcome.PENDING)),
                metrics.pagesLeased(), metrics.restoreBytes(), metrics.busyTotal(), shuttingDown, metrics.prefixCache());
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
        synchronized (instancesLock) {
            for (Instance i : instances.values()) if (i.session != null) drains.add(i.session.drained());
        }
        long deadline = nanoClock.getAsLong() + config.fenceDrainTimeoutNanos();
        for (CompletableFuture<Void> d : drains) await(d, Math.max(1, deadline - nanoClock.getAsLong()));
        try {
            copier.close(Math.max(1, deadline - nanoClock.getAsLong()));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        callbacks.shutdown();
        ticker.shutdownNow();
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

    Budget leaseTable() {
        return leaseTable;
    }

    Budget stagingBudget() {
        return stagingBudget;
    }

    RestoreCopier copier() {
        return copier;
    }

    /** Takes an unsealed reservation of a session that is closing; frees its slot after the grace. */
    void quarantine(io.orbitkv.core.storage.dram.Reservation reservation) {
        quarantine.hold(reservation, nanoClock.getAsLong());
    }

    /**
     * Runs {@code task} on a callback thread after {@code delayNanos} (the tick thread only hands
     * it over, so it never waits on a session lock); returns what cancels it.
     */
    Runnable schedule(Runnable task, long delayNanos) {
        ScheduledFuture<?> f;
        try {
            f = ticker.schedule(() -> callbacks.execute(task), delayNanos, TimeUnit.NANOSECONDS);
        } catch (RejectedExecutionException closing) {
            return () -> { };
        }
        return () -> f.cancel(false);
    }

    ExecutorService callbacks() {
        return callbacks;
    }

    ManagerMetrics metrics() {
        return metrics;
    }

    ManagerConfig config() {
        return config;
    }

    /** The protocol budgets this Manager enforces and announces. */
    public ProtocolLimits limits() {
        return limits;
    }

    /** The arena files REGISTERED announces, in arena-index order. */
    public List<Reply.ArenaFile> arenaFiles() {
        return arenaFiles;
    }
}
