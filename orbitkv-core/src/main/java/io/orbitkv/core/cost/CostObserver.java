package io.orbitkv.core.cost;

import io.micrometer.core.instrument.MeterRegistry;

import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;

/**
 * The entry point execution owners report to: {@link #record} one executed operation (and,
 * where the owner knows its eligible alternatives, {@link #recordAndShadow}). Owns the
 * {@link CostEstimator}, the meters and the status counters.
 *
 * <p>What it does with an {@link Observation}: always counts the terminal outcome, stage times
 * and bytes (unknown counted as unknown); a {@link Terminal#SUCCEEDED} one trains two separate
 * entries, the operation key with the service time (submission → completion) and the route key
 * with the total (enqueue → terminal). Failed, cancelled and timed-out operations train nothing.
 * Shadow comparisons look up the executed route key and each alternative and apply
 * {@link ShadowRule}; they never launch or change anything.
 *
 * <p>Thread model: thread-safe; called on the owners' completion threads (SSD workers, the
 * io_uring reaper, copy threads). Never blocks: the estimator is only {@code tryLock}ed.
 * Restore completion and peer fetch owners call the same {@link #record} with
 * {@link CostPath#RESTORE_COPY} / {@link CostPath#PEER_FETCH} keys.
 *
 * <p>Invariants: when disabled ({@link #disabled()}), every method returns at once, nothing is
 * registered and {@link #status()} reports {@code enabled=false}; owners test {@link #enabled()}
 * before reading clocks, so the disabled path costs one branch.
 *
 * <p>Design note: one observer per Manager (not per owner) so the 512-entry bound is global, as
 * the seed's P4.1 contract requires; the estimator clock is injected (tests drive expiry) while
 * stage instants come from the owners' {@link System#nanoTime()} reads.
 */
public final class CostObserver {

    private static final CostObserver DISABLED = new CostObserver();

    private final boolean enabled;
    private final CostConfig config;
    private final SelectionConfig selection;
    private final CostEstimator estimator;
    private final CostMetrics metrics;
    private final LongSupplier nanoClock;
    private final LongAdder trained = new LongAdder();
    private final LongAdder logicalUnknown = new LongAdder();
    private final LongAdder ioUnknown = new LongAdder();
    private final Map<Terminal, LongAdder> terminals = new EnumMap<>(Terminal.class);
    private final Map<ShadowOutcome, LongAdder> shadowCounts = new EnumMap<>(ShadowOutcome.class);
    private final LongAdder selectionSwitched = new LongAdder();
    private final Map<Selection.KeepReason, LongAdder> selectionKept = new EnumMap<>(Selection.KeepReason.class);
    private final Map<BoundaryChoice.Basis, LongAdder> boundaryChoices = new EnumMap<>(BoundaryChoice.Basis.class);

    private CostObserver() {
        this.enabled = false;
        this.config = CostConfig.disabled();
        this.selection = SelectionConfig.off();
        this.estimator = null;
        this.metrics = null;
        this.nanoClock = System::nanoTime;
    }

    private CostObserver(CostConfig config, SelectionConfig selection, MeterRegistry registry, LongSupplier nanoClock) {
        this.enabled = true;
        this.config = config;
        this.selection = selection;
        for (Selection.KeepReason r : Selection.KeepReason.values()) selectionKept.put(r, new LongAdder());
        for (BoundaryChoice.Basis b : BoundaryChoice.Basis.values()) boundaryChoices.put(b, new LongAdder());
        this.nanoClock = nanoClock;
        this.estimator = new CostEstimator(config);
        for (Terminal t : Terminal.values()) terminals.put(t, new LongAdder());
        for (ShadowOutcome o : ShadowOutcome.values()) shadowCounts.put(o, new LongAdder());
        this.metrics = new CostMetrics(registry, estimator, CostEstimator::size, CostEstimator::droppedContended);
    }

    /** The shared disabled observer. */
    public static CostObserver disabled() {
        return DISABLED;
    }

    /** An observer for {@code config}: the disabled one unless observations are enabled. */
    public static CostObserver create(CostConfig config, MeterRegistry registry, LongSupplier nanoClock) {
        return create(config, SelectionConfig.off(), registry, nanoClock);
    }

    /**
     * As {@link #create(CostConfig, MeterRegistry, LongSupplier)} with guarded selection per
     * {@code selection}; selection is off whenever observations are (nothing to select by).
     */
    public static CostObserver create(CostConfig config, SelectionConfig selection, MeterRegistry registry,
                                      LongSupplier nanoClock) {
        Objects.requireNonNull(config, "config");
        Objects.requireNonNull(selection, "selection");
        Objects.requireNonNull(registry, "registry");
        Objects.requireNonNull(nanoClock, "nanoClock");
        return config.observationsEnabled() ? new CostObserver(config, selection, registry, nanoClock) : DISABLED;
    }

    public boolean enabled() {
        return enabled;
    }

    public CostConfig config() {
        return config;
    }

    /** Counts one executed operation and, if it succeeded, trains its operation and route estimates. */
    public void record(Observation o) {
        if (!enabled) return;
        CostPath path = o.key().path();
        metrics.operation(path, o.terminal());
        metrics.stages(path, o.timeline());
        metrics.bytes(path, o.logicalBytes(), o.ioBytes());
        if (o.logicalBytes() instanceof ByteCount.Unknown) logicalUnknown.increment();
        if (o.ioBytes() instanceof ByteCount.Unknown) ioUnknown.increment();
        terminals.get(o.terminal()).increment();
        switch (o.terminal()) {
            case SUCCEEDED -> {
                long now = nanoClock.getAsLong();
                train(o.key().withKind(SampleKind.OPERATION), o.timeline().serviceNanos(), now);
                train(o.key(), o.timeline().totalNanos(), now);
            }
            case FAILED, CANCELLED, TIMED_OUT -> {
                // censored: a failure or a give-up is not a completion time
            }
        }
    }

    private void train(CostKey key, long nanos, long now) {
        if (estimator.train(key, nanos, now) == CostEstimator.Update.TRAINED) trained.increment();
    }

    /** {@link #record} then {@link #shadow} of the executed route against {@code alternatives}. */
    public List<ShadowComparison> recordAndShadow(Observation o, List<CostKey> alternatives) {
        if (!enabled) return List.of();
        record(o);
        return shadow(o.key(), alternatives);
    }

    /**
     * Compares the executed key's estimate with each alternative's. Empty when disabled, when
     * there are no alternatives, or when the estimator was contended (counted as dropped).
     */
    public List<ShadowComparison> shadow(CostKey executed, List<CostKey> alternatives) {
        if (!enabled || alternatives.isEmpty()) return List.of();
        List<CostKey> keys = new ArrayList<>(alternatives.size() + 1);
        keys.add(executed);
        keys.addAll(alternatives);
        Optional<List<Lookup>> looked = estimator.tryLookup(keys, nanoClock.getAsLong());
        if (looked.isEmpty()) return List.of();
        List<Lookup> l = looked.get();
        List<ShadowComparison> out = new ArrayList<>(alternatives.size());
        for (int i = 0; i < alternatives.size(); i++) {
            ShadowOutcome outcome = ShadowRule.compare(executed, l.getFirst(), alternatives.get(i), l.get(i + 1),
                    config.shadowMarginFraction());
            metrics.shadow(outcome);
            shadowCounts.get(outcome).increment();
            out.add(new ShadowComparison(executed, alternatives.get(i), outcome, l.getFirst(), l.get(i + 1)));
        }
        return out;
    }

    public SelectionConfig selection() {
        return selection;
    }

    /** Whether {@link #select} may ever answer {@link Selection.Switch} (one branch for callers). */
    public boolean selectionEnabled() {
        return enabled && selection.selectionEnabled();
    }

    /**
     * Applies {@link SelectionRule} to the default source and its alternatives with the
     * estimator's current lookups. Never blocks: a contended estimator keeps the default
     * ({@link Selection.KeepReason#CONTENDED}). The caller still acquires and admits the chosen
     * source authoritatively; this only says which one to try first.
     */
    public Selection select(SourceOffer defaultSource, List<SourceOffer> alternatives) {
        if (!selectionEnabled()) return new Selection.Keep(Selection.KeepReason.DISABLED);
        List<CostKey> keys = new ArrayList<>(alternatives.size() + 1);
        keys.add(defaultSource.key());
        for (SourceOffer a : alternatives) keys.add(a.key());
        Optional<List<Lookup>> looked = estimator.tryLookup(keys, nanoClock.getAsLong());
        Selection decision;
        if (looked.isEmpty()) {
            decision = new Selection.Keep(Selection.KeepReason.CONTENDED);
        } else {
            List<Lookup> l = looked.get();
            List<SourceCandidate> candidates = new ArrayList<>(alternatives.size());
            for (int i = 0; i < alternatives.size(); i++) candidates.add(alternatives.get(i).with(l.get(i + 1)));
            decision = SelectionRule.choose(selection, defaultSource.with(l.getFirst()), candidates,
                    config.shadowMarginFraction());
        }
        switch (decision) {
            case Selection.Switch s -> selectionSwitched.increment();
            case Selection.Keep(Selection.KeepReason reason) -> selectionKept.get(reason).increment();
        }
        return decision;
    }

    /** Selections that switched away from the default source. */
    public long selectionSwitched() {
        return enabled ? selectionSwitched.sum() : 0;
    }

    /** Selections that kept the default, by reason (empty when disabled). */
    public Map<Selection.KeepReason, Long> selectionKept() {
        Map<Selection.KeepReason, Long> out = new EnumMap<>(Selection.KeepReason.class);
        if (enabled) selectionKept.forEach((r, n) -> out.put(r, n.sum()));
        return out;
    }

    /**
     * Applies {@link BoundaryRule} with the shadow margin and counts the choice (metric
     * {@code orbitkv.cost.boundary}, tag {@code basis}; {@code /status} {@code cost.boundary}).
     * Pure apart from the counts: the caller built the candidates and serves the choice. When
     * observations are off the longest candidate is kept and nothing is counted.
     *
     * @param prefillTokensPerSecond the engine's measured prefill rate, 0 = unknown
     */
    public BoundaryChoice chooseBoundary(List<BoundaryCandidate> candidates, long promptTokens, long admissionNanos,
                                         double prefillTokensPerSecond) {
        if (!enabled) {
            return new BoundaryChoice(candidates.getFirst(), BoundaryChoice.Basis.NO_ESTIMATE, -1);
        }
        BoundaryChoice choice = BoundaryRule.choose(candidates, promptTokens, admissionNanos, prefillTokensPerSecond,
                config.shadowMarginFraction());
        boundaryChoices.get(choice.basis()).increment();
        metrics.boundary(choice.basis());
        return choice;
    }

    /**
     * Counts a query that kept its longest boundary without asking {@link BoundaryRule} (the
     * caller already knew the basis, e.g. {@code NO_PREFILL_RATE}: no candidates were built).
     */
    public void countKeptLongest(BoundaryChoice.Basis basis) {
        if (basis == BoundaryChoice.Basis.SHORTENED_BY_ESTIMATE) throw new IllegalArgumentException("not a keep: " + basis);
        if (!enabled) return;
        boundaryChoices.get(basis).increment();
        metrics.boundary(basis);
    }

    /** Boundary choices so far: shortened, and kept longest by basis (zeros and empty when disabled). */
    public BoundaryStatus boundaryStatus() {
        Map<BoundaryChoice.Basis, Long> kept = new EnumMap<>(BoundaryChoice.Basis.class);
        if (!enabled) return new BoundaryStatus(0, kept);
        for (BoundaryChoice.Basis b : BoundaryChoice.Basis.values()) {
            if (b != BoundaryChoice.Basis.SHORTENED_BY_ESTIMATE) kept.put(b, boundaryChoices.get(b).sum());
        }
        return new BoundaryStatus(boundaryChoices.get(BoundaryChoice.Basis.SHORTENED_BY_ESTIMATE).sum(), kept);
    }

    /** The estimator's current view of {@code key} (waits for the lock; not for execution threads). */
    public Lookup estimate(CostKey key) {
        if (!enabled) return new Lookup.Missing();
        return estimator.lookup(key, nanoClock.getAsLong());
    }

    /** Counts for {@code /status}. */
    public CostStatus status() {
        Map<Terminal, Long> censored = new EnumMap<>(Terminal.class);
        Map<ShadowOutcome, Long> shadow = new EnumMap<>(ShadowOutcome.class);
        SelectionStatus selectionStatus = new SelectionStatus(selectionEnabled(), selectionEnabled()
                && selection.crossMediumEnabled(), selectionSwitched(), selectionKept());
        if (!enabled) {
            return new CostStatus(false, 0, 0, config.maxEntries(), 0, censored, 0, 0, 0, shadow, selectionStatus,
                    boundaryStatus());
        }
        for (Terminal t : Terminal.values()) {
            if (t != Terminal.SUCCEEDED) censored.put(t, terminals.get(t).sum());
        }
        for (ShadowOutcome o : ShadowOutcome.values()) shadow.put(o, shadowCounts.get(o).sum());
        return new CostStatus(true, estimator.size(), estimator.warmEntries(nanoClock.getAsLong()), config.maxEntries(),
                trained.sum(), censored, estimator.droppedContended(), logicalUnknown.sum(), ioUnknown.sum(), shadow,
                selectionStatus, boundaryStatus());
    }

    /** The estimator, for tests in this package. */
    CostEstimator estimator() {
        return estimator;
    }
}
