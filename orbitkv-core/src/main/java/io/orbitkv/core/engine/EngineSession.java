package io.orbitkv.core.engine;

import io.orbitkv.core.query.QueryOperation;
import io.orbitkv.core.query.SessionCallback;
import io.orbitkv.core.query.SessionScope;
import io.orbitkv.core.query.Speculation;
import io.orbitkv.core.storage.dram.ChainLink;
import io.orbitkv.core.storage.dram.CommitResult;
import io.orbitkv.core.storage.dram.Reservation;
import io.orbitkv.core.storage.dram.ReserveResult;
import io.orbitkv.core.transfer.EngineRegion;
import io.orbitkv.core.transfer.RegionDirectory;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.StateKeys;
import io.orbitkv.state.protocol.DescriptorTicket;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.ProtocolLimits;
import io.orbitkv.state.protocol.Refusal;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import io.orbitkv.state.protocol.SettleOutcome;

import java.nio.file.attribute.UserPrincipal;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Set;
import java.util.concurrent.CompletableFuture;

/**
 * The Manager's side of one engine connection (protocol §9): its session state, its query
 * operations, its publish reservations and its destination regions.
 *
 * <p>Thread model: the transport calls {@link #handle} one request at a time; stagings and
 * copies complete on other threads and re-enter through the Manager's callback threads, except
 * a small RESTORE's copy, which runs on the calling thread inside {@code handle}, without the lock. All
 * mutable state is guarded by {@code lock} (this session's monitor, shared with its operations);
 * REGISTER waits for a fenced incarnation's drain without holding it. {@link #close()} may come
 * from any thread, any number of times.
 *
 * <p>Invariants: live + replaced operations {@code <= maxOperationsPerConnection} (a replacement
 * may pass it by its draining predecessor); open reservations {@code <= maxReservationsPerConnection};
 * regions {@code <= maxRegionsPerConnection}; after {@link #close()} the drain future completes
 * exactly when every operation ENDED, every reservation was handed to the publish quarantine
 * (protocol §9.6) and every region unmapped.
 *
 * <p>Design note: one lock per connection rather than per operation, because an operation's
 * events, its replacement and the connection's teardown all touch the same tables; requests of
 * one connection are sequential anyway, so the lock is contended only by that connection's own
 * I/O completions (at most {@code stagesPerOperation} per operation), never across connections.
 * Because {@code handle} holds the lock, a completion can never be emitted before the reply of
 * the request that started its work has been built: a staging that finishes first makes that
 * reply FINAL instead. The one exception is an inline RESTORE's RESTORE_DONE (see
 * {@link EventSink}), which the transport writes after the reply.
 *
 * <p>Size: over 500 lines because every table of the connection (operations, reservations,
 * regions) is counted where it changes, once Manager-wide and once for the namespace's STATS
 * ({@link NamespaceStats}); splitting the tables out would split the one lock's invariants.
 */
final class EngineSession implements ChannelSession, SessionCallback {

    /** The connection's life (protocol §9.1, plus teardown). */
    enum Phase { CONNECTED, REGISTERED, CLOSED }

    private final ManagerCore core;
    private final EventSink sink;
    /** The connecting process's user ({@code SO_PEERCRED}); regions must be its own files. */
    private final Optional<UserPrincipal> client;
    private final Object lock = new Object();
    private final CompletableFuture<Void> drained = new CompletableFuture<>();
    private final CompletableFuture<Void> closedSignal = new CompletableFuture<>();
    private final Map<Long, QueryOperation> live = new LinkedHashMap<>();
    private final Set<QueryOperation> replaced = new HashSet<>();
    private final Map<Long, Reservation> reservations = new LinkedHashMap<>();
    /** Where the latest QUERY's match ends, and the chain links of each RESERVE's pages. */
    private final PublishChains chains = new PublishChains();
    private final Map<Integer, EngineRegion> regions = new LinkedHashMap<>();
    private final SessionPrepares prepares;
    private Phase phase = Phase.CONNECTED;
    private ErrorCode closedCode = ErrorCode.SHUTTING_DOWN;
    private SessionScope scope;
    /**
     * Its namespace's STATS figures; set with {@link #scope}, never unset, so a draining session's
     * operations still count down. Volatile: {@link ManagerCore#stats} reads it from other sessions.
     */
    private volatile NamespaceStats stats;
    /** The instance id of REGISTER; set with {@link #scope}. */
    private String instanceId;
    private long nextReservationId = 1;
    private int nextRegionId;
    /** REGISTER_REGIONs between their bound check and their insertion (the file is opened unlocked). */
    private int regionsOpening;
    /** Set once the drain has started unmapping regions; {@link #drained} completes after. */
    private boolean finishing;

    EngineSession(ManagerCore core, EventSink sink, Optional<UserPrincipal> client) {
        this.core = core;
        this.sink = sink;
        this.client = client;
        this.prepares = new SessionPrepares(core, this, () -> stats, this::finishIfDrained);
    }

    @Override
    public Reply handle(Request request) {
        if (request instanceof Request.Register register) return register(register);
        if (request instanceof Request.RegisterRegion region) return registerRegion(region);
        if (request instanceof Request.Restore restore) return restore(restore);
        synchronized (lock) {
            Optional<Reply.Error> unregistered = notRegistered(request);
            if (unregistered.isPresent()) return unregistered.get();
            return switch (request) {
                case Request.Register ignored -> throw new IllegalStateException("handled above");
                case Request.RegisterRegion ignored -> throw new IllegalStateException("handled above");
                case Request.Query q -> query(q);
                case Request.QueryPoll p -> poll(p);
                case Request.Cancel c -> stop(c.operationId(), false);
                case Request.Release r -> stop(r.operationId(), true);
                case Request.PublishReserve r -> reserve(r);
                case Request.PublishCommit c -> commit(c);
                case Request.PublishAbort a -> abort(a);
                case Request.Restore ignored -> throw new IllegalStateException("handled above");
                case Request.Stats ignored -> core.stats(stats);
                case Request.Prepare p -> prepares.prepare(p, scope, live.containsKey(p.operationId()),
                        live.size() + replaced.size() + prepares.size());
                case Request.Hint h -> core.hints().apply(scope, h);
                case Request.Contains c -> core.locator().locate(scope, c);
            };
        }
    }

    /** The ERROR for {@code request} when the session is not REGISTERED (closed, or not yet); under the lock. */
    private Optional<Reply.Error> notRegistered(Request request) {
        if (phase == Phase.CLOSED) return Optional.of(new Reply.Error(closedCode, "the session is closed"));
        if (phase == Phase.CONNECTED) {
            return Optional.of(new Reply.Error(ErrorCode.OUT_OF_ORDER, request.type() + " before REGISTERED"));
        }
        return Optional.empty();
    }

    // ---- session ---------------------------------------------------------------------------

    private Reply register(Request.Register r) {
        synchronized (lock) {
            if (phase == Phase.CLOSED) return new Reply.Error(closedCode, "the session is closed");
            if (phase == Phase.REGISTERED) return new Reply.Error(ErrorCode.OUT_OF_ORDER, "already registered");
        }
        return switch (core.admit(this, r)) {
            case InstanceTable.Admission.Refused(Reply.Error error) -> error;
            case InstanceTable.Admission.Admitted(SessionScope admitted, long incarnationId) -> {
                synchronized (lock) {
                    if (phase == Phase.CLOSED) yield new Reply.Error(closedCode, "the session closed while registering");
                    scope = admitted;
                    stats = core.namespaceStats(admitted.namespaceId());
                    stats.connections.incrementAndGet();
                    instanceId = r.instanceId();
                    phase = Phase.REGISTERED;
                }
                core.publishObserver().onRegistered(r.instanceId(), r.namespace());
                DescriptorHandoff handoff = core.descriptorHandoff();
                // At most one offer per session, and sessions are bounded by maxConnections: the
                // handoff's table is sized so, so an empty answer is a bug, not a client's doing.
                DescriptorTicket ticket = handoff.offerArenas(this, core.arenaDescriptors(admitted.namespaceId()), client)
                        .orElseThrow(() -> new IllegalStateException("the descriptor ticket table is full"));
                yield new Reply.Registered(incarnationId, r.epoch(), core.limits(), ticket, handoff.socketPath(),
                        core.arenaFiles(admitted.namespaceId()).orElseThrow());
            }
        };
    }

    /**
     * Fences this incarnation (a higher epoch registered): ERROR {@code code} to the client, then
     * teardown. Returns the drain future.
     */
    CompletableFuture<Void> fence(ErrorCode code, String message) {
        synchronized (lock) {
            closedCode = code;
        }
        sink.fence(code, message);
        return shutdown();
    }

    @Override
    public void close() {
        shutdown();
    }

    /**
     * Cancels every operation, quarantines every unsealed reservation, unregisters regions after
     * drain. Idempotent.
     */
    CompletableFuture<Void> shutdown() {
        synchronized (lock) {
            if (phase != Phase.CLOSED) {
                if (phase == Phase.REGISTERED) stats.connections.decrementAndGet();
                phase = Phase.CLOSED;
                closedSignal.complete(null);
                core.sessionClosed(this);
                for (Reservation res : reservations.values()) {
                    core.endPublishing(res.namespaceId(), res.key());
                    core.quarantine(res);
                }
                core.metrics().reservations.addAndGet(-reservations.size());
                if (stats != null) stats.reservations.addAndGet(-reservations.size());
                reservations.clear();
                for (QueryOperation op : new ArrayList<>(live.values())) op.stop(false);
                for (QueryOperation op : new ArrayList<>(replaced)) op.stop(false);
                prepares.stopAll();
                finishIfDrained();
            }
        }
        core.descriptorHandoff().release(this);
        return drained;
    }

    /** Completes when this session is closed (its drain may still be running). */
    CompletableFuture<Void> closedSignal() {
        return closedSignal;
    }

    /** Completes when everything of this session is released (after {@link #shutdown()}). */
    CompletableFuture<Void> drained() {
        return drained;
    }

    /** The session's scope while it is REGISTERED (a remote prepare borrows its namespace and contract). */
    Optional<SessionScope> registeredScope() {
        synchronized (lock) {
            return phase == Phase.REGISTERED ? Optional.of(scope) : Optional.empty();
        }
    }

    boolean isOpen() {
        synchronized (lock) {
            return phase != Phase.CLOSED;
        }
    }

    /**
     * Once closed and every operation drained: the regions are unmapped on a callback thread (not
     * under the session lock, which completions of other operations may be waiting for), then
     * {@link #drained()} completes. Called under the lock; effective once.
     */
    private void finishIfDrained() {
        if (phase != Phase.CLOSED || !live.isEmpty() || !replaced.isEmpty() || prepares.size() > 0 || finishing) return;
        finishing = true;
        List<EngineRegion> unmap = List.copyOf(regions.values());
        core.metrics().regions.addAndGet(-regions.size());
        if (stats != null) stats.regions.addAndGet(-regions.size());
        regions.clear();
        Runnable finish = () -> {
            for (EngineRegion region : unmap) region.close();
            drained.complete(null);
        };
        try {
            core.callbacks().execute(finish);
        } catch (java.util.concurrent.RejectedExecutionException closing) {
            finish.run(); // the Manager's threads are gone: nothing else can run it
        }
    }

    // ---- queries ---------------------------------------------------------------------------

    private Reply query(Request.Query q) {
        Optional<Reply.Error> invalid = core.planner().check(q, scope);
        if (invalid.isPresent()) return invalid.get();
        QueryOperation existing = live.get(q.operationId());
        if (existing != null) {
            if (existing.state() == QueryOperation.State.DRAINING) {
                return busy(ManagerMetrics.Table.OPERATIONS, "operation " + q.operationId() + " is still draining");
            }
            if (q.revision() <= existing.revision()) {
                return new Reply.Error(ErrorCode.STALE_REVISION, "revision " + q.revision()
                        + " is not above the live revision " + existing.revision());
            }
        } else if (!prepares.has(q.operationId())
                && live.size() + replaced.size() + prepares.size() >= core.limits().maxOperationsPerConnection()) {
            return busy(ManagerMetrics.Table.OPERATIONS, "maxOperationsPerConnection "
                    + core.limits().maxOperationsPerConnection() + " reached");
        }
        QueryOperation op = new QueryOperation(stats.services(), this, q, scope);
        Optional<Reply.Error> refused = op.start();
        if (refused.isPresent()) {
            if (refused.get().code() == ErrorCode.BUSY) countBusy(ManagerMetrics.Table.LEASES);
            return refused.get();
        }
        chains.matched(op.lastHitPages());
        if (existing != null) {
            live.remove(q.operationId());
            replaced.add(existing);
            existing.stop(true);
        }
        prepares.takenOver(q.operationId()); // a QUERY of a prepared id ends the prepare: the QUERY holds what it needs
        if (op.state() != QueryOperation.State.ENDED) {
            live.put(q.operationId(), op);
            core.metrics().operations.incrementAndGet();
            stats.operations.incrementAndGet();
        }
        return op.result();
    }

    private Reply poll(Request.QueryPoll p) {
        QueryOperation op = live.get(p.operationId());
        if (op == null || op.state() == QueryOperation.State.DRAINING) {
            return new Reply.Error(ErrorCode.NOT_FOUND, "operation " + p.operationId() + " is not live");
        }
        if (op.revision() != p.revision()) {
            return new Reply.Error(ErrorCode.STALE_REVISION, "operation " + p.operationId() + " is at revision "
                    + op.revision() + ", not " + p.revision());
        }
        return op.result();
    }

    private Reply stop(long operationId, boolean release) {
        QueryOperation op = live.get(operationId);
        Optional<QueryOperation.Stopped> prepared = op == null ? prepares.stop(operationId) : Optional.empty();
        if (prepared.isEmpty() && (op == null || op.state() == QueryOperation.State.DRAINING)) {
            return new Reply.Error(ErrorCode.NOT_FOUND, "operation " + operationId + " is not live");
        }
        QueryOperation.Stopped s = prepared.isPresent() ? prepared.get() : op.stop(true);
        return release ? new Reply.Released(operationId, s.drained(), s.pagesReleased())
                : new Reply.Cancelled(operationId, s.drained(), s.pagesReleased());
    }

    /**
     * RESTORE: checked and started under the lock; a small restore's copy then runs here, on the
     * calling (connection) thread, without the lock, so this connection's completions and a fence
     * are not held up by it. Its RESTORE_DONE is emitted before this returns the RESTORE_ACCEPTED;
     * the transport writes the reply first (protocol §9.3), right before that event.
     */
    private Reply restore(Request.Restore r) {
        QueryOperation.Restoring started;
        synchronized (lock) {
            Optional<Reply.Error> unregistered = notRegistered(r);
            if (unregistered.isPresent()) return unregistered.get();
            QueryOperation op = live.get(r.operationId());
            if (op == null || op.state() == QueryOperation.State.DRAINING) {
                return new Reply.Error(ErrorCode.NOT_FOUND, "operation " + r.operationId() + " is not live");
            }
            EngineRegion region = regions.get(r.regionId());
            if (region == null) return new Reply.Error(ErrorCode.NOT_FOUND, "region " + r.regionId() + " is not registered");
            started = op.restore(r, region);
            if (started.reply() instanceof Reply.Error(ErrorCode code, String ignored) && code == ErrorCode.BUSY) {
                countBusy(ManagerMetrics.Table.RESTORES);
            }
        }
        started.copyHere().run();
        return started.reply();
    }

    /**
     * REGISTER_REGION: the file is opened and mapped without the session lock (a slow or hung
     * filesystem must not stall this connection's completions); the lock is taken before, to
     * check the phase and hold a place under {@code maxRegionsPerConnection}, and after, to add
     * the region, or to give it back if the session closed meanwhile.
     */
    private Reply registerRegion(Request.RegisterRegion r) {
        synchronized (lock) {
            if (phase == Phase.CLOSED) return new Reply.Error(closedCode, "the session is closed");
            if (phase == Phase.CONNECTED) {
                return new Reply.Error(ErrorCode.OUT_OF_ORDER, r.type() + " before REGISTERED");
            }
            if (regions.size() + regionsOpening >= core.limits().maxRegionsPerConnection()) {
                return busy(ManagerMetrics.Table.REGIONS, "maxRegionsPerConnection "
                        + core.limits().maxRegionsPerConnection() + " reached");
            }
            regionsOpening++;
        }
        EngineRegion.Opening opening;
        try {
            opening = switch (r.source()) {
                case Request.FromPath p -> core.regions().open(p.path(), r.sizeBytes(), r.pageBytes(), r.pageCount(), client);
                case Request.FromDescriptor d -> {
                    OptionalInt fd = core.descriptorHandoff().claimRegion(d.handle(), client);
                    yield fd.isEmpty() ? new EngineRegion.NotFound(RegionDirectory.REFUSED_DESCRIPTOR)
                            : RegionDirectory.openDescriptor(fd.getAsInt(), r.sizeBytes(), r.pageBytes(), r.pageCount());
                }
            };
        } finally {
            synchronized (lock) {
                regionsOpening--;
            }
        }
        return switch (opening) {
            case EngineRegion.NotFound(String reason) -> new Reply.Error(ErrorCode.NOT_FOUND, reason);
            case EngineRegion.Opened(EngineRegion region) -> {
                synchronized (lock) {
                    if (phase != Phase.CLOSED) {
                        int id = nextRegionId++;
                        regions.put(id, region);
                        core.metrics().regions.incrementAndGet();
                        stats.regions.incrementAndGet();
                        yield new Reply.RegionRegistered(id);
                    }
                }
                region.close();
                yield new Reply.Error(closedCode, "the session closed while the region was opened");
            }
        };
    }

    // ---- publish ---------------------------------------------------------------------------

    private Reply reserve(Request.PublishReserve r) {
        int largestSlot = core.store().largestSlotBytes();
        for (Request.PublishPage p : r.pages()) {
            if (scope.contract().group(p.groupId()).isEmpty()) {
                return new Reply.Error(ErrorCode.NAMESPACE_MISMATCH, "group " + p.groupId() + " is not in the contract");
            }
            if (p.lengthBytes() > largestSlot) {
                return new Reply.Error(ErrorCode.TOO_LARGE, "page of " + p.lengthBytes()
                        + " bytes exceeds the largest slot of " + largestSlot);
            }
        }
        List<Reply.ReserveOutcome> outcomes = new ArrayList<>(r.pages().size());
        List<Request.PublishPage> pages = r.pages();
        StateKey[] keys = new StateKey[pages.size()];
        for (int i = 0; i < keys.length; i++) {
            Request.PublishPage p = pages.get(i);
            keys[i] = p.form() == KeyForm.BLOCK_HASH
                    ? StateKeys.forBlockHash(scope.digestBytes(), p.groupId(), p.name().get(0))
                    : p.name().key(0);
        }
        ChainLink[] links = chains.links(pages, keys);
        for (int i = 0; i < keys.length; i++) {
            Request.PublishPage p = pages.get(i);
            if (reservations.size() >= core.limits().maxReservationsPerConnection()) {
                countBusy(ManagerMetrics.Table.RESERVATIONS);
                outcomes.add(new Reply.Refused(Refusal.BUSY));
                continue;
            }
            StateKey key = keys[i];
            // One publisher per key of a namespace, across connections and within one RESERVE: a
            // second would write the same immutable page for nothing and be DISCARDED at commit.
            if (!core.startPublishing(scope.namespaceId(), key)) {
                outcomes.add(new Reply.Refused(Refusal.ALREADY_RESIDENT));
                continue;
            }
            ReserveResult reserved = core.store().reserve(key, scope.namespaceId(), p.lengthBytes(),
                    r.tenant().orElse(null));
            if (!(reserved instanceof Reservation)) core.endPublishing(scope.namespaceId(), key);
            outcomes.add(switch (reserved) {
                case Reservation res -> {
                    res.chain(links[i]);
                    long id = nextReservationId++;
                    reservations.put(id, res);
                    core.metrics().reservations.incrementAndGet();
                    stats.reservations.incrementAndGet();
                    core.publishObserver().onReserved(instanceId, key, p.form(), p.name().get(0),
                            scope.namespace().pageTokens());
                    yield new Reply.Granted(id, res.slotRef().classIndex(), res.slotRef().offsetBytes());
                }
                case ReserveResult.AlreadyResident ignored -> new Reply.Refused(Refusal.ALREADY_RESIDENT);
                case ReserveResult.Full ignored -> new Reply.Refused(Refusal.NO_SPACE);
            });
        }
        return new Reply.Reserved(outcomes);
    }

    private Reply commit(Request.PublishCommit c) {
        List<SettleOutcome> outcomes = new ArrayList<>(c.reservationIds().size());
        for (long id : c.reservationIds()) {
            Reservation res = takeReservation(id);
            outcomes.add(res == null ? SettleOutcome.NOT_FOUND : switch (core.store().commit(res)) {
                case CommitResult.Inserted ignored -> SettleOutcome.SEALED;
                case CommitResult.Duplicate ignored -> SettleOutcome.DISCARDED;
                case CommitResult.NotOpen ignored -> SettleOutcome.NOT_FOUND;
            });
        }
        return new Reply.Committed(outcomes);
    }

    private Reply abort(Request.PublishAbort a) {
        List<SettleOutcome> outcomes = new ArrayList<>(a.reservationIds().size());
        for (long id : a.reservationIds()) {
            Reservation res = takeReservation(id);
            outcomes.add(res != null && core.store().abort(res) ? SettleOutcome.ABORTED : SettleOutcome.NOT_FOUND);
        }
        return new Reply.Aborted(outcomes);
    }

    private Reservation takeReservation(long id) {
        Reservation res = reservations.remove(id);
        if (res != null) {
            core.metrics().reservations.decrementAndGet();
            stats.reservations.decrementAndGet();
            core.endPublishing(res.namespaceId(), res.key());
        }
        return res;
    }

    private Reply.Error busy(ManagerMetrics.Table table, String message) {
        countBusy(table);
        return new Reply.Error(ErrorCode.BUSY, message);
    }

    /** Counts a refusal by a full table, Manager-wide and in the session's namespace; under the lock, once registered. */
    private void countBusy(ManagerMetrics.Table table) {
        core.metrics().busy(table);
        stats.busy.increment();
    }

    // ---- SessionCallback (under the lock, but lock() itself) --------------------------------

    @Override
    public Object lock() {
        return lock;
    }

    @Override
    public void emit(Reply.Completion event) {
        sink.complete(event);
    }

    @Override
    public void ended(QueryOperation operation) {
        if (live.remove(operation.operationId(), operation) | replaced.remove(operation)) {
            core.metrics().operations.decrementAndGet();
            stats.operations.decrementAndGet();
        }
        finishIfDrained();
    }

    @Override
    public void leaseTickets(long delta) {
        stats.leases.addAndGet(delta);
    }

    /** Its namespace's STATS figures; null until REGISTERED. */
    NamespaceStats namespaceStats() {
        return stats;
    }

    /** Its share of the speculation budget (lock-free budgets). */
    Speculation.SessionBudgets speculationBudgets() {
        return prepares.budgets();
    }

    /** Counts for STATS and /status, read under the lock. */
    int reservationCount() {
        synchronized (lock) {
            return reservations.size();
        }
    }

    ProtocolLimits limits() {
        return core.limits();
    }
}
