package io.orbitkv.core.catalog;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.orbitkv.core.log.UnexpectedErrors;
import io.orbitkv.state.StateKey;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

/**
 * The requester side of the embedded catalog: answers "who holds these keys?" by asking each key's
 * R shard owners ({@link Rendezvous#owners}), all owners of one batch in parallel under one
 * deadline, and merging their answers ({@link ReplicaMerge}: any owner's evidence makes a key
 * present; it is settled as soon as one owner has it), with a bounded cache of recent positive
 * answers in front. Each lookup carries the requester's placement version (its view digest); keys
 * an owner answers {@link KeyLocation.UnknownReason#STALE_PLACEMENT} are asked again, re-routed by
 * the view as of then, while the deadline allows. Lookup calls in flight are bounded
 * ({@code maxCallsInFlight}, metric {@code orbitkv_catalog_lookup_calls_in_flight}); a call over
 * the bound is not made, and its keys are Unknown(LOOKUP_LIMIT) unless another owner answers.
 *
 * <p>Owns the candidate cache. Thread model: thread-safe; {@link #lookup} never blocks (it
 * returns a future completed by the transport's threads or the deadline). Invariants: every
 * requested key gets exactly one answer; a key whose owner did not answer in time, failed, or
 * when this node's view is invalid is {@link KeyLocation.Unknown}, never {@link KeyLocation.Absent};
 * a cached answer is only served with holders that are still live at the same incarnation.
 *
 * <p>Design note: only positives are cached. A cached "absent" would hide a page published a
 * moment later (the requester would recompute what a peer holds); a stale positive costs one
 * refused peer authorization and a replan, which the peer protocol handles anyway. The TTL (the
 * daemon uses 30 s) must outlive the gap between an engine's QUERYs, which arrive once per
 * request, seconds apart; the size is bounded ({@code maxCandidates}, ~200 bytes each).
 */
public final class CatalogLookups {

    private final Supplier<MembershipView> view;
    private final CatalogTransport transport;
    private final Cache<StateKey, KeyLocation.Present> candidates;
    private final Timer latency;
    private final Counter cacheHits;
    private final Map<KeyLocation.UnknownReason, Counter> unknown = new EnumMap<>(KeyLocation.UnknownReason.class);
    private final int replicas;
    private final int maxCallsInFlight;
    private final AtomicInteger callsInFlight = new AtomicInteger();
    private final Counter callsRefused;
    private final Counter stalePlacementRetries;

    /** Rounds of asking again after STALE_PLACEMENT answers (the first included). */
    static final int STALE_PLACEMENT_ROUNDS = 4;
    /** Wait before asking again after STALE_PLACEMENT answers (views converge within one etcd watch event). */
    static final Duration STALE_PLACEMENT_RETRY = Duration.ofMillis(50);

    /** Lookups with one owner per key and at most 256 calls in flight. */
    public CatalogLookups(Supplier<MembershipView> view, CatalogTransport transport, Duration candidateTtl,
                          long maxCandidates, MeterRegistry registry) {
        this(view, transport, candidateTtl, maxCandidates, 1, 256, registry);
    }

    /** Lookups asking {@code replicas} owners per key, with at most {@code maxCallsInFlight} calls in flight. */
    public CatalogLookups(Supplier<MembershipView> view, CatalogTransport transport, Duration candidateTtl,
                          long maxCandidates, int replicas, int maxCallsInFlight, MeterRegistry registry) {
        if (replicas < 1 || maxCallsInFlight < 1) throw new IllegalArgumentException("replicas and calls in flight must be >= 1");
        this.replicas = replicas;
        this.maxCallsInFlight = maxCallsInFlight;
        this.callsRefused = Counter.builder("orbitkv_catalog_lookup_calls_refused").description("lookup calls not made: the in-flight bound was reached").register(registry);
        this.stalePlacementRetries = Counter.builder("orbitkv_catalog_stale_placement").tag("side", "requester")
                .description("keys asked again after a STALE_PLACEMENT answer").register(registry);
        Gauge.builder("orbitkv_catalog_lookup_calls_in_flight", callsInFlight, AtomicInteger::get).description("catalog lookup calls in flight").register(registry);
        Gauge.builder("orbitkv_catalog_lookup_calls_bound", this, l -> l.maxCallsInFlight).description("bound of catalog lookup calls in flight").register(registry);
        this.view = Objects.requireNonNull(view, "view");
        this.transport = Objects.requireNonNull(transport, "transport");
        // Maintenance on the thread that wrote, not the common pool: a lookup puts up to a batch of
        // positives at once, and each pool hand-off woke a worker (a futex wake per scheduled drain).
        this.candidates = Caffeine.newBuilder().expireAfterWrite(candidateTtl).maximumSize(maxCandidates)
                .executor(Runnable::run).build();
        this.latency = Timer.builder("orbitkv_catalog_lookup").description("catalog lookup batches, end to end")
                .publishPercentiles(0.5, 0.99).register(registry);
        this.cacheHits = Counter.builder("orbitkv_catalog_candidate_cache_hits").description("keys answered from the positive candidate cache").register(registry);
        for (KeyLocation.UnknownReason r : KeyLocation.UnknownReason.values()) {
            unknown.put(r, Counter.builder("orbitkv_catalog_unknown").tag("reason", r.name()).description("keys answered unknown").register(registry));
        }
    }

    /**
     * Where {@code keys} are held, by the current membership view, within {@code deadline}.
     * The returned map has every key (duplicates answered once), in request order.
     */
    public CompletableFuture<Map<StateKey, KeyLocation>> lookup(List<StateKey> keys, Duration deadline) {
        long t0 = System.nanoTime();
        MembershipView v = view.get();
        Map<StateKey, KeyLocation> out = new LinkedHashMap<>();
        if (!v.valid() || v.live().isEmpty()) {
            for (StateKey k : keys) out.put(k, unknown(KeyLocation.UnknownReason.NO_MEMBERSHIP));
            return CompletableFuture.completedFuture(out);
        }
        List<StateKey> toAsk = new ArrayList<>();
        for (StateKey k : keys) {
            if (out.putIfAbsent(k, ASKED) != null) continue; // a duplicate: answered once
            KeyLocation.Present cached = candidates.getIfPresent(k);
            if (cached != null) {
                Optional<KeyLocation.Present> still = live(cached, v);
                if (still.isPresent()) {
                    cacheHits.increment();
                    out.put(k, still.get());
                    continue;
                }
            }
            toAsk.add(k); // keeps its place in request order; filled below
        }
        long deadlineNanos = t0 + Math.max(1, deadline.toMillis()) * 1_000_000L;
        return rounds(toAsk, deadlineNanos, 0).thenApply(answers -> {
            for (int i = 0; i < toAsk.size(); i++) {
                KeyLocation loc = answers.get(i);
                if (loc instanceof KeyLocation.Present p) candidates.put(toAsk.get(i), p);
                if (loc instanceof KeyLocation.Unknown u) unknown.get(u.reason()).increment();
                out.put(toAsk.get(i), loc);
            }
            latency.record(Duration.ofNanos(System.nanoTime() - t0));
            return java.util.Collections.unmodifiableMap(out);
        });
    }

    /** A placeholder in {@link #lookup}'s ordered answer while the key is being asked; never returned. */
    private static final KeyLocation ASKED = new KeyLocation.Absent();

    /**
     * Asks every owner of {@code keys} (distinct) under the view as of now, then asks again,
     * re-routed by the view as of then, for the keys answered
     * {@link KeyLocation.UnknownReason#STALE_PLACEMENT} (at most {@link #STALE_PLACEMENT_ROUNDS}
     * rounds, {@link #STALE_PLACEMENT_RETRY} apart, within the deadline). One answer per key, in
     * the order of {@code keys}.
     */
    private CompletableFuture<List<KeyLocation>> rounds(List<StateKey> keys, long deadlineNanos, int round) {
        if (keys.isEmpty()) return CompletableFuture.completedFuture(List.of());
        MembershipView v = view.get();
        if (!v.valid() || v.live().isEmpty()) {
            return CompletableFuture.completedFuture(java.util.Collections.nCopies(keys.size(),
                    new KeyLocation.Unknown(KeyLocation.UnknownReason.NO_MEMBERSHIP)));
        }
        return ReplicaMerge.ask(keys, v, replicas, deadlineNanos, this::call).thenCompose(merged -> {
            List<Integer> stale = new ArrayList<>();
            for (int i = 0; i < merged.size(); i++) {
                if (merged.get(i) instanceof KeyLocation.Unknown u && u.reason() == KeyLocation.UnknownReason.STALE_PLACEMENT) {
                    stale.add(i);
                }
            }
            long waitNanos = Math.min(STALE_PLACEMENT_RETRY.toNanos(), deadlineNanos - System.nanoTime() - 1_000_000L);
            if (stale.isEmpty() || round + 1 >= STALE_PLACEMENT_ROUNDS || waitNanos <= 0) {
                return CompletableFuture.completedFuture(merged);
            }
            stalePlacementRetries.increment(stale.size());
            List<StateKey> again = stale.stream().map(keys::get).toList();
            Executor later = CompletableFuture.delayedExecutor(waitNanos, java.util.concurrent.TimeUnit.NANOSECONDS);
            return CompletableFuture.supplyAsync(() -> null, later)
                    .thenCompose(x -> rounds(again, deadlineNanos, round + 1))
                    .thenApply(answers -> {
                        List<KeyLocation> all = new ArrayList<>(merged);
                        for (int j = 0; j < stale.size(); j++) all.set(stale.get(j), answers.get(j));
                        return all;
                    });
        });
    }

    /**
     * The transport's lookup on {@code owner}. A failed call is an outcome (the keys are Unknown);
     * a call that throws instead of failing its future is a bug, counted, and answered the same.
     */
    private CompletableFuture<List<KeyLocation>> call(Member owner, List<StateKey> batch, MembershipView v, long timeoutMillis) {
        if (callsInFlight.incrementAndGet() > maxCallsInFlight) {
            callsInFlight.decrementAndGet();
            callsRefused.increment();
            return CompletableFuture.failedFuture(new ReplicaMerge.OverLimit());
        }
        CompletableFuture<List<KeyLocation>> f;
        try {
            f = transport.lookup(owner, batch, v.live(), v.digest(), timeoutMillis);
        } catch (RuntimeException e) {
            UnexpectedErrors.record(UnexpectedErrors.Layer.CLUSTER, "CatalogLookups.lookup", "unknown keys (UNREACHABLE)", e);
            f = CompletableFuture.failedFuture(e);
        }
        return f.orTimeout(timeoutMillis, java.util.concurrent.TimeUnit.MILLISECONDS)
                .whenComplete((r, t) -> callsInFlight.decrementAndGet());
    }

    private KeyLocation unknown(KeyLocation.UnknownReason reason) {
        unknown.get(reason).increment();
        return new KeyLocation.Unknown(reason);
    }

    /**
     * The cached positive answer for {@code key}, restricted to holders live at the same
     * incarnation in the current view; empty when the view is invalid or nothing is cached. No
     * RPC, no blocking: the query planner's synchronous path reads this.
     */
    public Optional<KeyLocation.Present> cached(StateKey key) {
        MembershipView v = view.get();
        if (!v.valid()) return Optional.empty();
        KeyLocation.Present hit = candidates.getIfPresent(key);
        return hit == null ? Optional.empty() : live(hit, v);
    }

    /** {@code cached} restricted to holders live at the same incarnation in {@code v}; empty when none is. */
    private static Optional<KeyLocation.Present> live(KeyLocation.Present cached, MembershipView v) {
        List<Holder> still = new ArrayList<>(cached.holders().size());
        for (Holder h : cached.holders()) {
            for (Member m : v.live()) {
                if (m.incarnation() == h.incarnation() && m.nodeId().equals(h.nodeId())) {
                    still.add(h);
                    break;
                }
            }
        }
        if (still.isEmpty()) return Optional.empty();
        return Optional.of(still.size() == cached.holders().size() ? cached : new KeyLocation.Present(still));
    }

    /** Drops every cached candidate (after membership changes, or in tests). */
    public void invalidateCandidates() {
        candidates.invalidateAll();
    }
}
