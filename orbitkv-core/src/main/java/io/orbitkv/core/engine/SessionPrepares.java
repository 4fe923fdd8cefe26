package io.orbitkv.core.engine;

import io.orbitkv.core.query.PrepareAccounting;
import io.orbitkv.core.query.PrepareOperation;
import io.orbitkv.core.query.QueryOperation;
import io.orbitkv.core.query.SessionCallback;
import io.orbitkv.core.query.SessionScope;
import io.orbitkv.core.query.Speculation;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.function.Supplier;

/**
 * The PREPARE operations of one engine session (protocol §5.11) and the session's share of the
 * speculation budget. Its operations share the session's operation ids and its
 * {@code maxOperationsPerConnection} with the QUERY operations.
 *
 * <p>Thread model: every method is called with the session's lock held (the session's monitor
 * confines this table and its operations).
 *
 * <p>Invariants: a live id is in at most one of the session's tables, except a prepare draining
 * after a QUERY took its id over ({@link #takenOver}); {@code live} holds exactly
 * the operations not ENDED (DRAINING ones included, which keep their id occupied); the session's
 * budgets are back at 0 once every operation ended.
 */
final class SessionPrepares {

    private final ManagerCore core;
    private final SessionCallback session;
    private final Runnable onEmpty;
    /** The session's namespace figures (set once the session registered, before any PREPARE). */
    private final Supplier<NamespaceStats> stats;
    private final Speculation.SessionBudgets budgets;
    private final Map<Long, PrepareOperation> live = new LinkedHashMap<>();

    /** @param onEmpty told (under the lock) whenever an operation ended, so a closing session can finish */
    SessionPrepares(ManagerCore core, SessionCallback session, Supplier<NamespaceStats> stats, Runnable onEmpty) {
        this.core = core;
        this.session = session;
        this.stats = stats;
        this.onEmpty = onEmpty;
        this.budgets = core.speculation().sessionBudgets();
    }

    Speculation.SessionBudgets budgets() {
        return budgets;
    }

    int size() {
        return live.size();
    }

    boolean has(long operationId) {
        return live.containsKey(operationId);
    }

    /** PREPARE: checked as a QUERY, then planned and admitted (see {@link PrepareOperation#start}). */
    Reply prepare(Request.Prepare p, SessionScope scope, boolean queryLive, int operations) {
        Request.Query demand = p.asQuery();
        Optional<Reply.Error> invalid = core.planner().check(demand, scope);
        if (invalid.isPresent()) return invalid.get();
        if (queryLive || live.containsKey(p.operationId())) {
            return new Reply.Error(ErrorCode.OUT_OF_ORDER, "operation " + p.operationId() + " is live");
        }
        if (operations >= core.limits().maxOperationsPerConnection()) {
            core.metrics().busy(ManagerMetrics.Table.OPERATIONS);
            stats.get().busy.increment();
            return new Reply.Error(ErrorCode.BUSY, "maxOperationsPerConnection "
                    + core.limits().maxOperationsPerConnection() + " reached");
        }
        PrepareOperation op = new PrepareOperation(stats.get().services(), budgets, session, p, scope, this::ended);
        Reply.Prepared answer = op.start();
        if (op.state() != PrepareOperation.State.ENDED) {
            live.put(p.operationId(), op);
            core.metrics().operations.incrementAndGet();
            stats.get().operations.incrementAndGet();
            stats.get().prepares.incrementAndGet();
        }
        return answer;
    }

    /** CANCEL or RELEASE of a prepare id: empty if the id is not a live prepare (or is draining). */
    Optional<QueryOperation.Stopped> stop(long operationId) {
        PrepareOperation op = live.get(operationId);
        if (op == null || op.state() == PrepareOperation.State.DRAINING) return Optional.empty();
        return Optional.of(op.stop(true, PrepareAccounting.Release.UNUSED));
    }

    /**
     * A QUERY took over the id of a live prepare (the same demand, now asked for): the prepare
     * ends; pages the QUERY leased were consumed when it settled at once, the rest are let go.
     */
    void takenOver(long operationId) {
        PrepareOperation op = live.get(operationId);
        if (op != null) op.stop(false, PrepareAccounting.Release.UNUSED);
    }

    /** The connection closed: every prepare lets go of its pages (reads in flight drain first). */
    void stopAll() {
        for (PrepareOperation op : new ArrayList<>(live.values())) op.stop(false, PrepareAccounting.Release.UNUSED);
    }

    private void ended(PrepareOperation op) {
        if (live.remove(op.operationId(), op)) {
            core.metrics().operations.decrementAndGet();
            stats.get().operations.decrementAndGet();
            stats.get().prepares.decrementAndGet();
        }
        onEmpty.run();
    }
}
