package io.orbitkv.bench.route;

import io.orbitkv.bench.trace.CachePolicy;
import io.orbitkv.bench.trace.CaffeinePolicy;
import io.orbitkv.bench.trace.LruPolicy;
import io.orbitkv.bench.trace.TraceRequest;
import io.orbitkv.router.BlockKeys;
import io.orbitkv.router.CostModel;
import io.orbitkv.router.Coverage;
import io.orbitkv.router.Decision;
import io.orbitkv.router.IndexEvent;
import io.orbitkv.router.Policy;
import io.orbitkv.router.RouteRequest;
import io.orbitkv.router.Router;
import io.orbitkv.router.RouterSettings;
import io.orbitkv.router.Tier;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.PriorityQueue;
import java.util.Set;

/**
 * A discrete-event replay of a request trace over N simulated workers routed by a real
 * {@link Router} with one {@link Policy}. Each worker is one engine with a host cache (DRAM, and an
 * optional SSD tier, evicting as the Manager does: W-TinyLFU via {@link CaffeinePolicy}, or LRU),
 * serving its queue first come, first served, one prefill at a time.
 *
 * <p>What happens to a request: it arrives at its (scaled) trace time and the router chooses a
 * worker from what its events have told it. When the worker starts it, the prefix is obtained from
 * the <em>true</em> caches at that moment, block by block along the chain: local DRAM, local SSD,
 * a peer's DRAM, a peer's SSD, up to the first block nobody holds; its prefill takes the transfer
 * time of that prefix plus the recompute of the rest ({@link CostModel}, the same constants the router
 * estimates with). TTFT = finish of the prefill − arrival (decode is not modelled: the trace's
 * output lengths do not delay a prefill here). When it finishes, the worker's host publishes the
 * request's blocks (the Manager's QUERY-then-PUBLISH use of its cache, {@link CachePolicy#access})
 * and the residency changes reach the router as one KV event batch, {@code eventDelayNanos} later.
 * The router's view can therefore be wrong (in flight, evicted since); the true caches decide.
 *
 * <p>Single-threaded; one instance per run.
 */
public final class RouteSimulation {

    /**
     * @param workers             simulated workers (1..64)
     * @param dramBlocks          host DRAM capacity per worker, in blocks
     * @param ssdBlocks           host SSD capacity per worker, in blocks (0: no SSD tier)
     * @param eviction            {@code w-tinylfu} or {@code lru} (the Manager's default); the two DRAM policies the Manager offers
     * @param costs               the prefill and transfer constants
     * @param timeScale           simulated nanoseconds per trace nanosecond (> 1: slower than the trace)
     * @param eventDelayNanos     from a residency change to the router seeing it
     * @param peerReads           whether a worker may read a prefix from another host
     */
    public record Config(int workers, int dramBlocks, int ssdBlocks, String eviction, RouteCosts costs, double timeScale,
                         long eventDelayNanos, boolean peerReads) {
        public Config {
            if (workers < 1 || workers > 64) throw new IllegalArgumentException("workers must be 1..64: " + workers);
            CachePolicy.requireCapacity(dramBlocks);
            if (ssdBlocks < 0) throw new IllegalArgumentException("ssdBlocks must be >= 0: " + ssdBlocks);
            if (!eviction.equals("w-tinylfu") && !eviction.equals("lru")) {
                throw new IllegalArgumentException("eviction must be w-tinylfu or lru: " + eviction);
            }
            if (!(timeScale > 0) || Double.isInfinite(timeScale)) throw new IllegalArgumentException("timeScale must be > 0: " + timeScale);
            if (eventDelayNanos < 0) throw new IllegalArgumentException("eventDelayNanos must be >= 0: " + eventDelayNanos);
        }
    }

    /**
     * What one policy achieved.
     *
     * @param hitRatio           prompt tokens obtained without recomputation (any source) / prompt tokens
     * @param localHitRatio      of those, from the worker's own host
     * @param workImbalance      max / mean of the workers' busy time
     * @param requestImbalance   max / mean of the workers' request counts
     * @param bytesBetweenHosts  bytes read from peers
     * @param utilization        busy time / (workers × span from first arrival to last finish)
     * @param fallbackDecisions  routes where at least one worker was scored by load only
     */
    public record Result(String policy, int workers, int requests, double ttftP50Ms, double ttftP99Ms, double ttftMeanMs,
                         double hitRatio, double localHitRatio, double workImbalance, double requestImbalance,
                         long bytesBetweenHosts, double utilization, long fallbackDecisions) {
    }

    private static final int FINISH = 0;
    private static final int DELIVER = 1;
    private static final int ARRIVAL = 2;

    private record Event(long timeNanos, int kind, long order, int worker, int request, long seq, List<IndexEvent> batch)
            implements Comparable<Event> {
        @Override
        public int compareTo(Event o) {
            if (timeNanos != o.timeNanos) return Long.compare(timeNanos, o.timeNanos);
            if (kind != o.kind) return Integer.compare(kind, o.kind);
            return Long.compare(order, o.order);
        }
    }

    private static final class Job {
        final int request;
        final long arrivalNanos;
        final long chargedTokens;
        long computedTokens;
        double computeSeconds;

        Job(int request, long arrivalNanos, long chargedTokens) {
            this.request = request;
            this.arrivalNanos = arrivalNanos;
            this.chargedTokens = chargedTokens;
        }
    }

    private final class SimWorker {
        final int index;
        final Set<Long> dramHeld = new HashSet<>();
        final Set<Long> ssdHeld = new HashSet<>();
        final List<Long> evictedDram = new ArrayList<>();
        final List<Long> evictedSsd = new ArrayList<>();
        final CachePolicy dram;
        final CachePolicy ssd;
        final ArrayDeque<Job> queue = new ArrayDeque<>();
        Job running;
        long busyNanos;
        int requests;
        long seq;

        SimWorker(int index) {
            this.index = index;
            this.dram = cache(config.dramBlocks(), evictedDram::add);
            this.ssd = config.ssdBlocks() == 0 ? null : cache(config.ssdBlocks(), evictedSsd::add);
        }
    }

    private final List<TraceRequest> trace;
    private final Policy policy;
    private final Config config;
    private final CostModel cost;
    private final Router router;
    private final List<SimWorker> workers = new ArrayList<>();
    private final long[][] keys;
    private final PriorityQueue<Event> events = new PriorityQueue<>();
    private final double[] ttftMs;
    private long order;
    private long promptTokens;
    private long hitTokens;
    private long localHitTokens;
    private long bytesBetweenHosts;
    private long firstArrival = Long.MAX_VALUE;
    private long lastFinish;

    private RouteSimulation(List<TraceRequest> trace, Policy policy, Config config) {
        if (trace.isEmpty()) throw new IllegalArgumentException("empty trace");
        this.trace = trace;
        this.policy = policy;
        this.config = config;
        this.cost = config.costs().costModel();
        List<String> names = new ArrayList<>();
        for (int i = 0; i < config.workers(); i++) names.add("worker-" + i);
        this.router = new Router(RouterSettings.defaults(cost), names);
        this.keys = new long[trace.size()][];
        this.ttftMs = new double[trace.size()];
    }

    /** Replays {@code trace} (in its order, at its timestamps scaled by the config) with {@code policy}. */
    public static Result run(List<TraceRequest> trace, Policy policy, Config config) {
        return new RouteSimulation(trace, policy, config).run();
    }

    /** The time scale at which the trace's cold prefill work keeps {@code workers} workers {@code load} busy. */
    public static double timeScaleForLoad(List<TraceRequest> trace, int workers, double load, RouteCosts costs) {
        if (!(load > 0)) throw new IllegalArgumentException("load must be > 0: " + load);
        long tokens = 0;
        for (TraceRequest r : trace) tokens += r.inputLength();
        double work = tokens / costs.prefillTokensPerSecond();
        double span = Math.max(1, trace.getLast().timestampMs() - trace.getFirst().timestampMs()) / 1000.0;
        return work / (span * workers * load);
    }

    private CachePolicy cache(int capacity, java.util.function.LongConsumer evicted) {
        return config.eviction().equals("lru") ? new LruPolicy(capacity, evicted) : new CaffeinePolicy(capacity, evicted);
    }

    private Result run() {
        for (int i = 0; i < config.workers(); i++) workers.add(new SimWorker(i));
        long t0 = trace.getFirst().timestampMs();
        for (int q = 0; q < trace.size(); q++) {
            TraceRequest r = trace.get(q);
            long[] k = new long[r.blocks()];
            for (int i = 0; i < k.length; i++) k[i] = BlockKeys.of(r.block(i));
            keys[q] = k;
            long at = (long) ((r.timestampMs() - t0) * 1e6 * config.timeScale());
            events.add(new Event(at, ARRIVAL, order++, -1, q, 0, List.of()));
            promptTokens += r.inputLength();
        }
        while (!events.isEmpty()) {
            Event e = events.poll();
            switch (e.kind()) {
                case ARRIVAL -> arrive(e.request(), e.timeNanos());
                case FINISH -> finish(workers.get(e.worker()), e.timeNanos());
                case DELIVER -> router.onBatch(e.worker(), e.seq(), e.batch(), e.timeNanos());
                default -> throw new IllegalStateException("event kind " + e.kind());
            }
        }
        return result();
    }

    private void arrive(int q, long now) {
        firstArrival = Math.min(firstArrival, now);
        router.onTick(now);
        Decision d = router.route(new RouteRequest(keys[q], trace.get(q).inputLength()), policy, now);
        SimWorker w = workers.get(d.worker());
        w.queue.add(new Job(q, now, d.chargedTokens()));
        w.requests++;
        if (w.running == null) start(w, now);
    }

    private void start(SimWorker w, long now) {
        Job j = w.queue.poll();
        if (j == null) return;
        w.running = j;
        TraceRequest r = trace.get(j.request);
        Coverage c = trueCoverage(w, j.request);
        long recompute = cost.recomputeTokens(r.inputLength(), c.prefixBlocks());
        double seconds = cost.transferSeconds(c) + recompute / config.costs().prefillTokensPerSecond();
        long hit = r.inputLength() - recompute;
        hitTokens += hit;
        localHitTokens += Math.min(hit, (long) (c.localBlocks() + c.localSsdBlocks()) * cost.blockTokens());
        bytesBetweenHosts += c.peerBlocks() * cost.bytesPerBlock();
        j.computedTokens = recompute;
        j.computeSeconds = recompute / config.costs().prefillTokensPerSecond();
        long service = Math.max(1, (long) (seconds * 1e9));
        w.busyNanos += service;
        events.add(new Event(now + service, FINISH, order++, w.index, j.request, 0, List.of()));
    }

    private void finish(SimWorker w, long now) {
        Job j = w.running;
        w.running = null;
        ttftMs[j.request] = (now - j.arrivalNanos) / 1e6;
        lastFinish = Math.max(lastFinish, now);
        TraceRequest r = trace.get(j.request);
        List<IndexEvent> batch = new ArrayList<>();
        publish(r, w.dram, w.dramHeld, w.evictedDram, Tier.DRAM, batch);
        if (w.ssd != null) publish(r, w.ssd, w.ssdHeld, w.evictedSsd, Tier.SSD, batch);
        if (!batch.isEmpty()) {
            events.add(new Event(now + config.eventDelayNanos(), DELIVER, order++, w.index, -1, w.seq++, List.copyOf(batch)));
        }
        router.completed(w.index, j.chargedTokens, j.computedTokens, j.computeSeconds, now);
        start(w, now);
    }

    /** The request's blocks enter the tier as the Manager's PUBLISH puts them; the changes become events. */
    private static void publish(TraceRequest r, CachePolicy cache, Set<Long> held, List<Long> evicted, Tier tier,
                                List<IndexEvent> batch) {
        Set<Long> added = new LinkedHashSet<>();
        for (int i = 0; i < r.blocks(); i++) {
            if (!held.contains(r.block(i))) added.add(r.block(i));
        }
        evicted.clear();
        cache.access(r);
        held.addAll(added);
        evicted.forEach(held::remove);
        if (!added.isEmpty()) batch.add(new IndexEvent.Stored(keysOf(added), tier));
        if (!evicted.isEmpty()) batch.add(new IndexEvent.Removed(keysOf(evicted), tier));
        if (held.size() > cache.capacityBlocks()) {
            throw new IllegalStateException(tier + " mirror holds " + held.size() + " blocks, over " + cache.capacityBlocks());
        }
    }

    private static long[] keysOf(java.util.Collection<Long> ids) {
        long[] out = new long[ids.size()];
        int i = 0;
        for (long id : ids) out[i++] = BlockKeys.of(id);
        return out;
    }

    private Coverage trueCoverage(SimWorker w, int q) {
        TraceRequest r = trace.get(q);
        int local = 0, localSsd = 0, peerDram = 0, peerSsd = 0, localPrefix = 0;
        boolean prefixLocal = true;
        for (int i = 0; i < r.blocks(); i++) {
            long b = r.block(i);
            if (w.dramHeld.contains(b)) {
                local++;
                if (prefixLocal) localPrefix++;
            } else if (w.ssdHeld.contains(b)) {
                localSsd++;
                if (prefixLocal) localPrefix++;
            } else if (config.peerReads() && anyOther(w, b, true)) {
                peerDram++;
                prefixLocal = false;
            } else if (config.peerReads() && anyOther(w, b, false)) {
                peerSsd++;
                prefixLocal = false;
            } else {
                break;
            }
        }
        return new Coverage(local, localSsd, peerDram, peerSsd, localPrefix);
    }

    private boolean anyOther(SimWorker self, long block, boolean dram) {
        for (SimWorker v : workers) {
            if (v != self && (dram ? v.dramHeld : v.ssdHeld).contains(block)) return true;
        }
        return false;
    }

    private Result result() {
        double[] sorted = ttftMs.clone();
        Arrays.sort(sorted);
        double mean = Arrays.stream(sorted).average().orElse(0);
        long maxBusy = 0, sumBusy = 0;
        int maxReq = 0;
        for (SimWorker w : workers) {
            maxBusy = Math.max(maxBusy, w.busyNanos);
            sumBusy += w.busyNanos;
            maxReq = Math.max(maxReq, w.requests);
        }
        int n = workers.size();
        double meanBusy = (double) sumBusy / n;
        double span = Math.max(1, lastFinish - firstArrival);
        return new Result(policy.name(), n, trace.size(), percentile(sorted, 0.50), percentile(sorted, 0.99), mean,
                (double) hitTokens / promptTokens, hitTokens == 0 ? 0 : (double) localHitTokens / hitTokens,
                meanBusy == 0 ? 1 : maxBusy / meanBusy, (double) maxReq / ((double) trace.size() / n), bytesBetweenHosts,
                sumBusy / (n * span), router.counters().fallbackDecisions());
    }

    /** Nearest-rank percentile of sorted values. */
    static double percentile(double[] sorted, double p) {
        int rank = (int) Math.ceil(p * sorted.length);
        return sorted[Math.max(0, Math.min(sorted.length - 1, rank - 1))];
    }
}
