package io.orbitkv.core.engine;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.core.query.PrepareAccounting;
import io.orbitkv.core.query.PrepareOperation;
import io.orbitkv.core.query.QueryOperation;
import io.orbitkv.core.query.SessionCallback;
import io.orbitkv.core.query.SessionScope;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;

import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * PREPAREs that arrive from the network rather than from an engine connection (a router that
 * picked this Manager's worker asks for the request's prefix over the cluster plane, see
 * docs/cluster.md "Remote prepare"). They run through the same {@link PrepareOperation} as an
 * engine PREPARE, owned by one Manager-internal owner per namespace: its own operation table and
 * its own share of the speculation budget (a session's share), under the Manager-wide speculation
 * budget and {@code prepareMaxOperations}. The pages they hold are consumed by a QUERY of the
 * namespace from any connection, and expire at first use plus {@code prepareGraceMillis} like
 * any prepare's.
 *
 * <p>Unlike an engine's, a remote prepare usually arrives with the catalog's candidate cache
 * cold for its pages (no QUERY of the request ran here yet), so peers are looked up before it is
 * planned.
 *
 * <p>A remote prepare needs the namespace's recovery contract, which only a REGISTER carries:
 * it is answered NOT_REGISTERED unless an engine of that namespace is registered and connected.
 *
 * <p>Thread model: thread-safe. {@link #owners} is guarded by its own monitor (taken without any
 * other lock held, and released before an owner's lock is taken); each owner's monitor confines
 * its operations, as a session's lock does, and is what their stagings and timers take.
 *
 * <p>Invariants: per namespace at most {@code maxOperationsPerConnection} live remote prepares
 * (past that: BUSY); at most one owner per namespace id (bounded by the namespace table); an
 * owner's budgets are back at 0 once its operations ended.
 */
public final class RemotePrepares {

    /** How a remote prepare was answered: as PREPARED, or NOT_REGISTERED, BUSY, INVALID (nothing planned). */
    public enum Outcome { ACCEPTED, TRIMMED, REFUSED, NOT_REGISTERED, BUSY, INVALID }

    /** The answer: outcome, pages that will be staged, pages already resident, and why (INVALID only). */
    public record Answer(Outcome outcome, int pagesToStage, int pagesResident, String detail) {
    }

    private final ManagerCore core;
    private final Map<Integer, Owner> owners = new HashMap<>();
    private final AtomicInteger live = new AtomicInteger();
    /** Set by {@link #close}: a prepare whose lookup answers later starts nothing. */
    private volatile boolean closed;
    private final Map<Outcome, Counter> answered = new EnumMap<>(Outcome.class);
    private final MeterRegistry registry;
    private final List<Meter> meters = new ArrayList<>();

    RemotePrepares(ManagerCore core, MeterRegistry registry) {
        this.core = Objects.requireNonNull(core, "core");
        this.registry = Objects.requireNonNull(registry, "registry");
        for (Outcome o : Outcome.values()) {
            answered.put(o, Counter.builder("orbitkv.manager.remote.prepares")
                    .tag("outcome", o.name().toLowerCase(Locale.ROOT))
                    .description("PREPAREs received over the cluster plane, by outcome").register(registry));
        }
        meters.addAll(answered.values());
        meters.add(Gauge.builder("orbitkv.manager.remote.prepares.live", live, AtomicInteger::get)
                .description("remote prepares staging or holding pages").register(registry));
    }

    /**
     * Prepares the demand {@code groups} of the namespace with digest {@code namespace}, first used
     * in {@code firstUseMillis}; the outcome as an engine PREPARE's, or NOT_REGISTERED, BUSY, or
     * INVALID (the demand fails the QUERY checks). With peers, the catalog is asked first where the
     * pages no local tier holds are ({@link PrepareOperation#discover}), so the future completes
     * after that lookup (bounded by its deadline), on a callback thread.
     */
    public CompletableFuture<Answer> prepare(NamespaceDigest namespace, int firstUseMillis, int priority, long promptTokens,
                                             List<Request.QueryGroup> groups) {
        Optional<SessionScope> scope = core.registeredScope(namespace);
        if (scope.isEmpty()) return CompletableFuture.completedFuture(count(new Answer(Outcome.NOT_REGISTERED, 0, 0, "")));
        Owner owner;
        synchronized (owners) {
            owner = owners.computeIfAbsent(scope.get().namespaceId(), id -> new Owner());
        }
        Request.Prepare p;
        try {
            p = owner.demand(scope.get(), firstUseMillis, priority, promptTokens, groups);
        } catch (IllegalArgumentException e) {
            return CompletableFuture.completedFuture(count(new Answer(Outcome.INVALID, 0, 0, String.valueOf(e.getMessage()))));
        }
        CompletableFuture<Void> found = PrepareOperation.discover(core.queryServices(), p, scope.get());
        if (found.isDone()) return CompletableFuture.completedFuture(count(owner.start(scope.get(), p)));
        return found.handleAsync((ignored, failure) -> count(owner.start(scope.get(), p)), core.queryServices().callbacks());
    }

    /** Live remote prepares (all namespaces). */
    public int live() {
        return live.get();
    }

    /** The Manager closes: every remote prepare lets go of its pages (reads in flight drain); the meters go. */
    void close() {
        closed = true;
        List<Owner> all;
        synchronized (owners) {
            all = new ArrayList<>(owners.values());
        }
        for (Owner o : all) o.stopAll();
        meters.forEach(registry::remove);
    }

    private Answer count(Answer a) {
        answered.get(a.outcome()).increment();
        return a;
    }

    /** One namespace's remote prepares: the lock, table and budget share a session would have. */
    private final class Owner implements SessionCallback {
        private final Object lock = new Object();
        private final io.orbitkv.core.query.Speculation.SessionBudgets budgets = core.speculation().sessionBudgets();
        private final Map<Long, PrepareOperation> ops = new LinkedHashMap<>();
        private long nextId = 1;

        /** The demand as a PREPARE of this owner's next id; IllegalArgumentException when it is not one. */
        Request.Prepare demand(SessionScope scope, int firstUseMillis, int priority, long promptTokens,
                               List<Request.QueryGroup> groups) {
            long id;
            synchronized (lock) {
                id = nextId++;
            }
            Request.Prepare p = new Request.Prepare(id, firstUseMillis, priority, promptTokens, 0, groups);
            Optional<Reply.Error> invalid = core.planner().check(p.asQuery(), scope);
            if (invalid.isPresent()) throw new IllegalArgumentException(invalid.get().message());
            return p;
        }

        /** Plans and admits {@code p} (see {@link PrepareOperation#start}), within this owner's bound. */
        Answer start(SessionScope scope, Request.Prepare p) {
            synchronized (lock) {
                if (closed) return new Answer(Outcome.NOT_REGISTERED, 0, 0, "");
                if (ops.size() >= core.limits().maxOperationsPerConnection()) return new Answer(Outcome.BUSY, 0, 0, "");
                PrepareOperation op = new PrepareOperation(core.queryServices(), budgets, this, p, scope, this::ended);
                Reply.Prepared r = op.start();
                if (op.state() != PrepareOperation.State.ENDED) {
                    ops.put(p.operationId(), op);
                    live.incrementAndGet();
                }
                Outcome o = switch (r.outcome()) {
                    case ACCEPTED -> Outcome.ACCEPTED;
                    case TRIMMED -> Outcome.TRIMMED;
                    case REFUSED -> Outcome.REFUSED;
                };
                return new Answer(o, r.pagesToStage(), r.pagesResident(), "");
            }
        }

        void stopAll() {
            synchronized (lock) {
                for (PrepareOperation op : new ArrayList<>(ops.values())) op.stop(false, PrepareAccounting.Release.UNUSED);
            }
        }

        private void ended(PrepareOperation op) {
            if (ops.remove(op.operationId(), op)) live.decrementAndGet();
        }

        @Override
        public Object lock() {
            return lock;
        }

        @Override
        public void emit(Reply.Completion event) {
            // nobody to tell: the router that asked does not wait for the staging
        }

        @Override
        public void ended(QueryOperation operation) {
            // owns no QUERY
        }
    }
}
