package io.orbitkv.core.engine;

import io.orbitkv.core.namespace.NamespaceTable;
import io.orbitkv.core.query.SessionScope;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.OptionalInt;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BooleanSupplier;
import java.util.function.LongSupplier;

/**
 * The engine instances a Manager has admitted: per instance id, the highest epoch ever admitted,
 * the session that holds it and its incarnation id; REGISTER's admission (protocol §9.2) with
 * fencing of the previous incarnation; and the namespace ids REGISTER binds in the
 * {@link NamespaceTable}.
 *
 * <p>Thread model: thread-safe. {@code lock} guards the table and namespace allocation; it may
 * be held while a session's lock is taken, never the other way round (sessions report closing
 * through the core's concurrent set). Fencing and drain waits happen without it.
 *
 * <p>Invariants: per instance id, at most one open session; a lower epoch is never admitted after
 * a higher one; at most {@code maxInstances} records (records without an open, undrained session
 * are dropped first when full).
 *
 * <p>Design note: REGISTER of a higher epoch fences the old incarnation and answers only after
 * its drain, bounded by {@code fenceDrainTimeoutNanos} (30 s default: a drain waits for at most
 * 64 in-flight 2 MiB SSD reads per operation and a few copies, milliseconds in practice); past
 * that the REGISTER is answered BUSY and may be retried with the same epoch.
 */
final class InstanceTable {

    private final java.util.function.IntPredicate arenas;
    private final NamespaceTable namespaces;
    private final ManagerBounds bounds;
    private final ManagerMetrics metrics;
    private final LongSupplier nanoClock;
    private final BooleanSupplier shuttingDown;
    private final Object lock = new Object();
    // @GuardedBy("lock")
    private final Map<String, Instance> instances = new LinkedHashMap<>();
    // @GuardedBy("lock")
    private long incarnations;

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
     * @param arenas whether a namespace has (or now gets) its DRAM arenas; false when
     *               {@code maxArenaNamespaces} other namespaces have theirs, and REGISTER is refused
     */
    InstanceTable(NamespaceTable namespaces, ManagerBounds bounds, ManagerMetrics metrics, LongSupplier nanoClock,
                  BooleanSupplier shuttingDown, java.util.function.IntPredicate arenas) {
        this.arenas = Objects.requireNonNull(arenas, "arenas");
        this.namespaces = Objects.requireNonNull(namespaces, "namespaces");
        this.bounds = Objects.requireNonNull(bounds, "bounds");
        this.metrics = Objects.requireNonNull(metrics, "metrics");
        this.nanoClock = Objects.requireNonNull(nanoClock, "nanoClock");
        this.shuttingDown = Objects.requireNonNull(shuttingDown, "shuttingDown");
    }

    /**
     * Admits a REGISTER (protocol §9.2): refuses a lower epoch, or the same epoch while that
     * incarnation is connected; fences a connected lower epoch and waits for its drain; waits too
     * for a disconnected predecessor that is still draining. A same-epoch REGISTER whose previous
     * connection still looks open first waits up to {@link ManagerBounds#reconnectGraceNanos} for that
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
        await(previous.closedSignal(), bounds.reconnectGraceNanos());
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
        if (shuttingDown.getAsBoolean()) return refuse(ErrorCode.SHUTTING_DOWN, "the Manager is shutting down");
        EngineSession toFence = null;
        CompletableFuture<Void> predecessorDrain = CompletableFuture.completedFuture(null);
        SessionScope scope;
        long incarnationId;
        synchronized (lock) {
            OptionalInt namespaceId = namespaceId(NamespaceDigest.ofBytes(r.namespace().digest()));
            if (namespaceId.isEmpty()) {
                metrics.busy(ManagerMetrics.Table.NAMESPACES);
                return refuse(ErrorCode.BUSY, "the namespace table is full");
            }
            if (!arenas.test(namespaceId.getAsInt())) {
                metrics.busy(ManagerMetrics.Table.ARENA_NAMESPACES);
                return refuse(ErrorCode.BUSY, "maxArenaNamespaces namespaces already have DRAM arenas on this Manager");
            }
            Instance instance = instances.get(r.instanceId());
            if (instance == null) {
                if (instances.size() >= bounds.maxInstances() && !dropDisconnectedInstance()) {
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
            instance.incarnationId = ++incarnations;
            incarnationId = instance.incarnationId;
            scope = new SessionScope(r.namespace(), namespaceId.getAsInt(), r.contract());
        }
        if (toFence != null) {
            toFence.fence(ErrorCode.STALE_EPOCH, "instance " + r.instanceId() + " registered with higher epoch "
                    + r.epoch());
        }
        if (!await(predecessorDrain, bounds.fenceDrainTimeoutNanos())) {
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

    /** Waits for {@code drain} at most {@code timeoutNanos}; false on timeout or interrupt. */
    boolean await(CompletableFuture<Void> drain, long timeoutNanos) {
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

    /** The drains of every incarnation that has a session (for the Manager's close). */
    List<CompletableFuture<Void>> drains() {
        List<CompletableFuture<Void>> out = new ArrayList<>();
        synchronized (lock) {
            for (Instance i : instances.values()) if (i.session != null) out.add(i.session.drained());
        }
        return out;
    }

    /** Each instance's id, epoch, incarnation and whether it is connected, for {@code /status}. */
    List<ManagerStatus.InstanceStatus> statuses() {
        List<ManagerStatus.InstanceStatus> list = new ArrayList<>();
        synchronized (lock) {
            instances.forEach((id, i) -> list.add(new ManagerStatus.InstanceStatus(id, i.epoch, i.incarnationId,
                    i.session != null && i.session.isOpen())));
        }
        return list;
    }
}
