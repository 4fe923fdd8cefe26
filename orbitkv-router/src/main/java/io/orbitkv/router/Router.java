package io.orbitkv.router;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.OptionalInt;

/**
 * The router's scoring core: a {@link PrefixIndex} fed by each worker's KV event batches, each
 * worker's outstanding prefill work and measured prefill rate, and {@link #route}, which builds
 * one {@link Candidate} per worker and lets a {@link Policy} choose. No I/O: the daemon and the
 * simulator deliver events, completions and the clock.
 *
 * <p>Thread model: not thread-safe; one owner serialises every call (the daemon's lock, the
 * simulator's single thread). Time is a parameter ({@code nowNanos}) of every call that needs it.
 *
 * <p>Fallback rules (docs/routing.md): a worker's index entries are used only while it is
 * <em>trusted</em>. It stops being trusted when (1) its event sequence skips ({@link
 * BatchOutcome#GAP}): until a replay has filled the gap, or at most {@code repairBoundNanos}, after
 * which its entries are cleared and rebuilt from the live stream; (2) it is stale: work routed to
 * it that must publish blocks was due {@code staleAfterNanos} ago and no batch came since. An
 * untrusted worker is covered as holding nothing and serves no peer read, so it is scored by load;
 * if every worker is untrusted, every policy chooses by load. A restart (sequence 0 again, an
 * {@code AllBlocksCleared} event, or {@link #restarted}) clears its entries. None of this can cause
 * a wrong hit: the router only chooses where to send a request, and the Manager there validates
 * every block it reports.
 */
public final class Router {

    /** Outstanding requests tracked one by one per worker; past it, new charges join the youngest entry. */
    static final int MAX_JOBS_PER_WORKER = 65_536;

    /**
     * Route times kept to measure the arrival rate ({@link Outlook}); past it the oldest is
     * overwritten and a longer horizon is extrapolated from the span kept. 65,536 × 8 B = 512 KiB;
     * at the shipped trace's densest minute (a few requests per second) it spans hours.
     */
    static final int MAX_ARRIVALS_KEPT = 65_536;

    private enum Trust { TRUSTED, REPAIRING }

    /** Per worker, owned by the router. */
    private static final class Worker {
        final String name;
        /** Sum of {@link #jobs}. */
        long outstandingTokens;
        /** Charges of the requests routed here and not completed, oldest first (a FIFO engine runs the head). */
        final java.util.ArrayDeque<Long> jobs = new java.util.ArrayDeque<>();
        /** When the head job started: its routing time, or the previous completion. */
        long headStartNanos;
        double prefillTokensPerSecond;
        long rateSamples;
        /** The sequence expected next; -1: none yet (the next batch, whatever its sequence, is the start). */
        long expectedSeq = -1;
        Trust trust = Trust.TRUSTED;
        long repairSinceNanos;
        /** The sequence of the batch that revealed the gap: repaired once it has been applied. */
        long repairThroughSeq;
        boolean awaitingEvents;
        /** When routed work that must publish blocks makes this worker stale if no batch has come. */
        long staleAtNanos;

        Worker(String name, double rate) {
            this.name = name;
            this.prefillTokensPerSecond = rate;
        }
    }

    /** Counters since start (a snapshot). */
    public record Counters(Map<String, Long> routedByPolicy, long fallbackDecisions, long batches, long gaps,
                           long repairsCompleted, long repairsAbandoned, long restarts, long duplicates,
                           long ignored, int indexBlocks, int indexMaxBlocks, long indexEvicted) {
        public Counters {
            routedByPolicy = Map.copyOf(routedByPolicy);
        }
    }

    /** One worker's state, for status output and tests. */
    public record WorkerStatus(String name, boolean trusted, boolean repairing, boolean stale, long outstandingTokens,
                               double prefillTokensPerSecond, long expectedSequence) {
    }

    private final RouterSettings settings;
    private final CostModel cost;
    private final PrefixIndex index;
    private final List<Worker> workers = new ArrayList<>();
    private final Map<String, Integer> byName = new HashMap<>();
    private final Map<String, Long> routedByPolicy = new HashMap<>();
    private long fallbackDecisions;
    private long batches;
    private long gaps;
    private long repairsCompleted;
    private long repairsAbandoned;
    private long restarts;
    private long duplicates;
    private long ignored;
    /** Ring of the last {@link #arrivalCount} route times (capped at its length), oldest at {@link #arrivalHead}. */
    private final long[] arrivalNanos = new long[MAX_ARRIVALS_KEPT];
    private int arrivalHead;
    private int arrivalCount;
    /** When the first request was routed (-1: none yet): the start of every since-the-start measure below. */
    private long firstArrivalNanos = -1;
    /** Engine seconds (transfer + recompute) charged to the chosen workers since the start. */
    private double routedWorkSeconds;
    /** Blocks stored in an engine's or a host's memory (HBM and DRAM events; SSD copies are not new residents). */
    private long storedBlocks;
    /** Blocks the chosen workers were estimated to obtain without recompute. */
    private long reusedBlocks;

    public Router(RouterSettings settings, List<String> workerNames) {
        this.settings = Objects.requireNonNull(settings, "settings");
        this.cost = settings.cost();
        this.index = new PrefixIndex(settings.maxBlocks());
        if (workerNames.isEmpty() || workerNames.size() > PrefixIndex.MAX_WORKERS) {
            throw new IllegalArgumentException("1.." + PrefixIndex.MAX_WORKERS + " workers, not " + workerNames.size());
        }
        for (String n : workerNames) {
            if (n == null || n.isEmpty()) throw new IllegalArgumentException("a worker needs a name");
            if (byName.putIfAbsent(n, workers.size()) != null) throw new IllegalArgumentException("duplicate worker " + n);
            workers.add(new Worker(n, cost.defaultPrefillTokensPerSecond()));
        }
    }

    public RouterSettings settings() {
        return settings;
    }

    public int workers() {
        return workers.size();
    }

    public String name(int worker) {
        return w(worker).name;
    }

    /** The index of the worker named {@code name}, if there is one. */
    public OptionalInt indexOf(String name) {
        Integer i = byName.get(name);
        return i == null ? OptionalInt.empty() : OptionalInt.of(i);
    }

    /** The block index (read it, do not feed it: events go through {@link #onBatch}). */
    public PrefixIndex index() {
        return index;
    }

    /** Chooses a worker for {@code request} with {@code policy} and charges it the estimated prefill. */
    public Decision route(RouteRequest request, Policy policy, long nowNanos) {
        if (request.blocks() > settings.maxChainBlocks()) {
            throw new IllegalArgumentException("a route request carries at most " + settings.maxChainBlocks()
                    + " blocks, not " + request.blocks());
        }
        int n = workers.size();
        long trustedMask = 0;
        for (int i = 0; i < n; i++) {
            if (trusted(i, nowNanos)) trustedMask |= 1L << i;
        }
        Coverage[] coverage = index.cover(request.blockKeys(), n, trustedMask);
        List<Candidate> candidates = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            Worker k = workers.get(i);
            double rate = k.prefillTokensPerSecond;
            long recompute = cost.recomputeTokens(request.promptTokens(), coverage[i].prefixBlocks());
            long queued = queuedTokens(k, nowNanos);
            candidates.add(new Candidate(i, k.name, (trustedMask & (1L << i)) != 0, queued,
                    queued / rate, cost.transferSeconds(coverage[i]), recompute / rate, recompute, coverage[i]));
        }
        Outlook outlook = outlook(candidates, nowNanos);
        Candidate chosen = candidates.get(policy.choose(candidates, outlook));
        recordArrival(nowNanos);
        if (firstArrivalNanos < 0) firstArrivalNanos = nowNanos;
        routedWorkSeconds += chosen.workSeconds();
        reusedBlocks += chosen.coverage().prefixBlocks();
        Worker k = workers.get(chosen.worker());
        if (k.jobs.isEmpty()) k.headStartNanos = nowNanos;
        if (k.jobs.size() < MAX_JOBS_PER_WORKER) {
            k.jobs.addLast(chosen.recomputeTokens());
        } else {
            k.jobs.addLast(k.jobs.pollLast() + chosen.recomputeTokens());
        }
        k.outstandingTokens += chosen.recomputeTokens();
        if (chosen.recomputeTokens() >= cost.blockTokens()) {
            // this request will publish at least one whole block: events are due once it has run
            long due = nowNanos + (long) (chosen.ttftSeconds() * 1e9) + settings.staleAfterNanos();
            if (!k.awaitingEvents || due < k.staleAtNanos) k.staleAtNanos = due;
            k.awaitingEvents = true;
        }
        boolean fallback = trustedMask != (n == 64 ? -1L : (1L << n) - 1);
        if (fallback) fallbackDecisions++;
        routedByPolicy.merge(policy.name(), 1L, Long::sum);
        return new Decision(chosen, policy.name(), chosen.recomputeTokens(), fallback, candidates, outlook);
    }

    /**
     * The worker finished the prefill of a request routed to it: gives back the {@code chargedTokens}
     * of its {@link Decision} (the oldest outstanding request with that charge, else the oldest) and,
     * when {@code computedTokens} and {@code prefillSeconds} are positive, folds the measured rate
     * into the worker's estimate. The next request starts now.
     */
    public void completed(int worker, long chargedTokens, long computedTokens, double prefillSeconds, long nowNanos) {
        Worker k = w(worker);
        if (chargedTokens < 0) throw new IllegalArgumentException("chargedTokens must be >= 0: " + chargedTokens);
        if (!k.jobs.isEmpty()) {
            long removed = k.jobs.removeFirstOccurrence(chargedTokens) ? chargedTokens : k.jobs.pollFirst();
            k.outstandingTokens -= removed;
            k.headStartNanos = nowNanos;
        }
        if (computedTokens > 0 && prefillSeconds > 0 && Double.isFinite(prefillSeconds)) {
            double measured = computedTokens / prefillSeconds;
            k.prefillTokensPerSecond = k.rateSamples == 0 ? measured
                    : (1 - settings.rateWeight()) * k.prefillTokensPerSecond + settings.rateWeight() * measured;
            k.rateSamples++;
        }
    }

    /**
     * One event batch of {@code worker}'s topic with its sequence number (docs/kv-events.md).
     * Batches must come in sequence; see {@link BatchOutcome} for what happens otherwise.
     */
    public BatchOutcome onBatch(int worker, long seq, List<IndexEvent> events, long nowNanos) {
        Worker k = w(worker);
        if (seq < 0) throw new IllegalArgumentException("sequence must be >= 0: " + seq);
        batches++;
        BatchOutcome outcome;
        if (k.expectedSeq < 0) {
            // the first batch seen (or the first after giving up a repair): a suffix of the stream
            // is safe to apply, since what came before can only be blocks we do not know of
            outcome = BatchOutcome.APPLIED;
        } else if (seq == 0 && k.expectedSeq > 0) {
            index.clearWorker(worker);
            restarts++;
            k.trust = Trust.TRUSTED;
            outcome = BatchOutcome.RESTARTED;
        } else if (seq < k.expectedSeq) {
            duplicates++;
            return BatchOutcome.DUPLICATE;
        } else if (seq > k.expectedSeq) {
            if (k.trust == Trust.REPAIRING) {
                ignored++;
                return BatchOutcome.IGNORED;
            }
            gaps++;
            k.trust = Trust.REPAIRING;
            k.repairSinceNanos = nowNanos;
            k.repairThroughSeq = seq;
            return BatchOutcome.GAP;
        } else {
            outcome = BatchOutcome.APPLIED;
        }
        apply(worker, events);
        k.expectedSeq = seq + 1;
        k.awaitingEvents = false;
        if (k.trust == Trust.REPAIRING && seq >= k.repairThroughSeq) {
            k.trust = Trust.TRUSTED;
            repairsCompleted++;
        }
        return outcome;
    }

    /** The sequence {@code worker}'s next batch should carry (where a replay starts); -1 before the first. */
    public long nextSequence(int worker) {
        return w(worker).expectedSeq;
    }

    /** Whether {@code worker} is waiting for a replay to fill a gap. */
    public boolean repairing(int worker) {
        return w(worker).trust == Trust.REPAIRING;
    }

    /**
     * A replay answer for {@code worker} ended. If the gap is still open (the publisher no longer
     * kept the missing batches), the worker's entries are cleared and rebuilt from the live stream.
     */
    public void onReplayEnd(int worker, long nowNanos) {
        if (w(worker).trust == Trust.REPAIRING) abandonRepair(worker);
    }

    /** Ends repairs older than the bound; call it periodically (the daemon: every 100 ms). */
    public void onTick(long nowNanos) {
        for (int i = 0; i < workers.size(); i++) {
            Worker k = workers.get(i);
            if (k.trust == Trust.REPAIRING && nowNanos - k.repairSinceNanos >= settings.repairBoundNanos()) abandonRepair(i);
        }
    }

    /** {@code worker} is a new process (a new instance, a restarted engine): forget what it held and its sequence. */
    public void restarted(int worker, long nowNanos) {
        Worker k = w(worker);
        index.clearWorker(worker);
        restarts++;
        k.expectedSeq = -1;
        k.trust = Trust.TRUSTED;
        k.awaitingEvents = false;
        k.outstandingTokens = 0;
        k.jobs.clear();
    }

    /**
     * {@code worker}'s event stream can no longer be followed (a batch that does not decode):
     * forget its entries and take its next batch, whatever its sequence, as a new start.
     * Outstanding work is kept (the worker itself did not restart).
     */
    public void forget(int worker) {
        Worker k = w(worker);
        index.clearWorker(worker);
        k.expectedSeq = -1;
        k.trust = Trust.TRUSTED;
    }

    /** Whether {@code worker}'s index entries are used now (see the class comment). */
    public boolean trusted(int worker, long nowNanos) {
        Worker k = w(worker);
        return k.trust == Trust.TRUSTED && !stale(k, nowNanos);
    }

    public WorkerStatus status(int worker, long nowNanos) {
        Worker k = w(worker);
        return new WorkerStatus(k.name, trusted(worker, nowNanos), k.trust == Trust.REPAIRING, stale(k, nowNanos),
                k.outstandingTokens, k.prefillTokensPerSecond, k.expectedSeq);
    }

    public Counters counters() {
        return new Counters(routedByPolicy, fallbackDecisions, batches, gaps, repairsCompleted, repairsAbandoned, restarts,
                duplicates, ignored, index.size(), index.maxBlocks(), index.evictedTotal());
    }

    /**
     * The backlog's horizon and the arrivals expected in it, and the measured worth of a stored block.
     * Horizon: while every worker is busy the shortest queue drains at 1 − ρ of the engines' speed
     * (ρ = work routed since the start over the workers' time since the start; the engines also
     * serve what keeps arriving), so it lasts {@code q_min / (1 − ρ)}; at ρ ≥ 1, or longer than the
     * time measured, it is the time measured. The arrival rate is measured over the horizon it is
     * applied to, so there is no window to choose.
     */
    private Outlook outlook(List<Candidate> candidates, long nowNanos) {
        double reuse = reuseSecondsPerBlock();
        double min = Double.POSITIVE_INFINITY;
        for (Candidate c : candidates) min = Math.min(min, c.queueSeconds());
        if (!(min > 0) || !Double.isFinite(min) || arrivalCount == 0) return new Outlook(0, 0, reuse);
        double measured = (nowNanos - firstArrivalNanos) / 1e9;
        double rho = routedWorkSeconds / (workers.size() * measured);
        double horizon = rho < 1 ? Math.min(min / (1 - rho), measured) : measured;
        if (!(horizon > 0)) return new Outlook(0, 0, reuse);
        long from = nowNanos - (long) (horizon * 1e9);
        // binary search of the first kept arrival after `from` (route times never decrease)
        int lo = 0;
        int hi = arrivalCount;
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (arrivalAt(mid) > from) hi = mid; else lo = mid + 1;
        }
        double arrivals = arrivalCount - lo;
        if (lo == 0 && arrivalCount == MAX_ARRIVALS_KEPT) {
            long span = nowNanos - arrivalAt(0);
            if (span > 0) arrivals = arrivalCount * (horizon * 1e9 / span);
        }
        return new Outlook(horizon, arrivals, reuse);
    }

    /**
     * Recompute seconds a block stored in memory has saved so far, on average: blocks reused without
     * recompute over blocks stored, times one block's prefill at the workers' mean rate. In a full
     * cache every block stored evicts one, so this is also what a block a choice copies to a second
     * host costs in the cache it displaces.
     */
    private double reuseSecondsPerBlock() {
        if (storedBlocks == 0) return 0;
        double rate = 0;
        for (Worker k : workers) rate += k.prefillTokensPerSecond;
        rate /= workers.size();
        return (double) reusedBlocks / storedBlocks * cost.blockTokens() / rate;
    }

    private long arrivalAt(int i) {
        return arrivalNanos[(arrivalHead + i) % MAX_ARRIVALS_KEPT];
    }

    private void recordArrival(long nowNanos) {
        if (arrivalCount > 0 && nowNanos < arrivalAt(arrivalCount - 1)) {
            // a clock that went back: keep the ring sorted by treating this route as simultaneous
            nowNanos = arrivalAt(arrivalCount - 1);
        }
        if (arrivalCount < MAX_ARRIVALS_KEPT) {
            arrivalNanos[(arrivalHead + arrivalCount) % MAX_ARRIVALS_KEPT] = nowNanos;
            arrivalCount++;
        } else {
            arrivalNanos[arrivalHead] = nowNanos;
            arrivalHead = (arrivalHead + 1) % MAX_ARRIVALS_KEPT;
        }
    }

    /**
     * Outstanding tokens less what the head job has computed since it started, at the measured
     * rate (never below the rest of the queue): counting a running job in full would make a worker
     * about to finish a long prefill look as busy as one that just began it.
     */
    private static long queuedTokens(Worker k, long nowNanos) {
        Long head = k.jobs.peekFirst();
        if (head == null) return 0;
        long done = (long) (k.prefillTokensPerSecond * Math.max(0, nowNanos - k.headStartNanos) / 1e9);
        return k.outstandingTokens - Math.min(head, done);
    }

    private static boolean stale(Worker k, long nowNanos) {
        return k.awaitingEvents && nowNanos - k.staleAtNanos > 0;
    }

    private void abandonRepair(int worker) {
        Worker k = workers.get(worker);
        index.clearWorker(worker);
        k.expectedSeq = -1;
        k.trust = Trust.TRUSTED;
        repairsAbandoned++;
    }

    private void apply(int worker, List<IndexEvent> events) {
        for (IndexEvent e : events) {
            switch (e) {
                case IndexEvent.Stored s -> {
                    for (long key : s.keys()) index.stored(worker, s.tier(), key);
                    if (s.tier() != Tier.SSD) storedBlocks += s.keys().length;
                }
                case IndexEvent.Removed r -> {
                    for (long key : r.keys()) index.removed(worker, r.tier(), key);
                }
                case IndexEvent.Cleared c -> index.clearWorker(worker);
            }
        }
    }

    private Worker w(int worker) {
        if (worker < 0 || worker >= workers.size()) throw new IllegalArgumentException("no worker " + worker);
        return workers.get(worker);
    }
}
