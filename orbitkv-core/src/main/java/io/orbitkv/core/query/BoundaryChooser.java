package io.orbitkv.core.query;

import io.orbitkv.core.cost.BoundaryCandidate;
import io.orbitkv.core.cost.BoundaryChoice;
import io.orbitkv.core.cost.CostObserver;
import io.orbitkv.core.cost.Estimate;
import io.orbitkv.core.cost.Lookup;
import io.orbitkv.core.cost.SourceMedium;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.protocol.Request;

import java.util.List;
import java.util.Set;

/**
 * Decides, for a QUERY whose longest legal boundary needs SSD staging or a peer fetch, whether to
 * serve it or the longest DRAM-only legal boundary instead, by estimated time to the first token
 * ({@link io.orbitkv.core.cost.BoundaryRule}, through {@link CostObserver#chooseBoundary}).
 *
 * <p>Owns nothing across calls: it takes the planner's full plan, may plan once more with DRAM
 * only, and returns exactly one plan; every lease of the plan it does not return is released
 * before it returns. Thread model: called by {@link QueryOperation#start} under the session lock;
 * reads the cost estimator (which it locks briefly) and the SSD index.
 *
 * <p>Candidates (at most 2 of {@link io.orbitkv.core.cost.BoundaryRule#MAX_CANDIDATES}): the
 * longest legal boundary, and the longest legal boundary made of DRAM-resident pages only when
 * it is shorter and above the origin (a DRAM-only miss is no candidate: recomputing the whole
 * prompt is never chosen over a hit). Boundaries in between are not offered: the planner's
 * DRAM-only selection is already the best boundary with no transfer, and any longer one pays
 * the same per-wave staging latency as the longest (see the model), so it cannot beat both.
 *
 * <p>{@code state_ready} model of the longest boundary: its pages to stage are read by the SSD
 * store's default route at most {@code parallelism = min(stagesPerOperation, ssd ioThreads)} at
 * a time, so ready ≈ {@code ceil(ssdPages / parallelism)} × (route estimate of one extent read
 * of the largest staged footprint), mean and error both scaled. The route estimate is the
 * complete-route sample (enqueue → terminal), so queueing behind other reads is included. A page
 * only a peer holds has no estimate wired on this branch ({@code peer_fetch} has no owner that
 * records yet), so such a plan counts as {@code NO_ESTIMATE} and keeps the longest boundary. The
 * DRAM-only boundary is ready at admission (warm zero); admission is taken as 0 (no admission
 * estimate exists; the same for both, it only matters through the {@code max}).
 *
 * <p>Gate: only with {@code ORBITKV_COST_OBSERVATIONS=1} ({@link CostObserver#enabled}); guarded
 * selection ({@code ORBITKV_COST_SELECTION}) is not required, because choosing a boundary does
 * not switch a source or medium: both candidates are served from DRAM in the end. Without a rate
 * (0) no DRAM-only plan is made at all (no second lookup pass) and the choice is counted as
 * {@code NO_PREFILL_RATE}.
 *
 * <p>Design note: the second lookup pass costs ~100 ns a page (the planner's figure), paid only
 * when the longest plan stages and a rate is known; a staged 256 KiB page costs 50–200 µs, so
 * the pass is under 1 % of what it may save.
 */
final class BoundaryChooser {

    private BoundaryChooser() {}

    /** {@code full} or a shorter DRAM-only plan; the other one's leases are released. */
    static QueryPlan choose(QueryPlan.Hit full, Request.Query query, SessionScope scope, Set<StateKey> excluded,
                            QueryServices services) {
        CostObserver observer = services.store().costObserver();
        if (!observer.enabled() || full.stagingBytes() == 0) return full;
        if (query.prefillTokensPerSecond() == 0) {
            observer.countKeptLongest(BoundaryChoice.Basis.NO_PREFILL_RATE);
            return full;
        }
        BoundaryCandidate longest = new BoundaryCandidate(full.boundaryTokens(), medium(full, scope, services),
                stateReady(full, scope, services));
        QueryPlan dramOnly = services.planner().plan(query, scope, excluded, true);
        if (!(dramOnly instanceof QueryPlan.Hit dram) || dram.boundaryTokens() >= full.boundaryTokens()) {
            if (dramOnly instanceof QueryPlan.Hit unused) unused.releaseAll();
            observer.chooseBoundary(List.of(longest), query.promptTokens(), 0, query.prefillTokensPerSecond());
            return full;
        }
        BoundaryChoice choice = observer.chooseBoundary(
                List.of(longest, BoundaryCandidate.resident(dram.boundaryTokens())), query.promptTokens(), 0,
                query.prefillTokensPerSecond());
        return switch (choice.basis()) {
            case SHORTENED_BY_ESTIMATE -> {
                full.releaseAll();
                yield dram;
            }
            case ONLY_CANDIDATE, NO_PREFILL_RATE, NO_ESTIMATE, LONGEST_BY_ESTIMATE -> {
                dram.releaseAll();
                yield full;
            }
        };
    }

    /** SSD, or DRAM when some page comes from a peer (a peer owner serves from its DRAM, see {@link SourceMedium}). */
    private static SourceMedium medium(QueryPlan.Hit plan, SessionScope scope, QueryServices services) {
        for (QueryPlan.SlotSpan s : plan.spans()) {
            for (PageSlot p : s.pages()) {
                if (p.stagingBytes > 0 && !services.store().onSsd(p.key, scope.digest())) return SourceMedium.DRAM;
            }
        }
        return SourceMedium.SSD;
    }

    /** The model in the class comment: waves of parallel SSD reads; unknown with any peer page. */
    static Lookup stateReady(QueryPlan.Hit plan, SessionScope scope, QueryServices services) {
        long ssdPages = 0;
        long largest = 0;
        for (QueryPlan.SlotSpan s : plan.spans()) {
            for (PageSlot p : s.pages()) {
                if (p.stagingBytes == 0) continue;
                if (!services.store().onSsd(p.key, scope.digest())) return new Lookup.Missing();
                ssdPages++;
                largest = Math.max(largest, p.stagingBytes);
            }
        }
        Lookup perRead = services.store().ssdReadEstimate(largest);
        if (!(perRead instanceof Lookup.Warm(Estimate e))) return perRead;
        long parallelism = Math.max(1, Math.min(services.bounds().stagesPerOperation(), services.store().ssdIoThreads()));
        long waves = (ssdPages + parallelism - 1) / parallelism;
        return new Lookup.Warm(new Estimate(e.meanNanos() * waves, e.errorNanos() * waves, e.samples(), e.ageNanos()));
    }
}
