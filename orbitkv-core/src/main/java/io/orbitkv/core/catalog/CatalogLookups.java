package io.orbitkv.core.catalog;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.orbitkv.core.log.UnexpectedErrors;
import io.orbitkv.state.StateKey;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;

/**
 * The requester side of the embedded catalog: answers "who holds these keys?" by asking each key's
 * shard owner, all owners of one batch in parallel under one deadline, with a bounded cache of
 * recent positive answers in front.
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

    public CatalogLookups(Supplier<MembershipView> view, CatalogTransport transport, Duration candidateTtl,
                          long maxCandidates, MeterRegistry registry) {
        this.view = Objects.requireNonNull(view, "view");
        this.transport = Objects.requireNonNull(transport, "transport");
        this.candidates = Caffeine.newBuilder().expireAfterWrite(candidateTtl).maximumSize(maxCandidates).build();
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
        Set<String> liveIncarnations = new HashSet<>();
        for (Member m : v.live()) liveIncarnations.add(m.nodeId() + "#" + m.incarnation());
        Map<Member, List<StateKey>> byOwner = new LinkedHashMap<>();
        for (StateKey k : keys) {
            if (out.containsKey(k)) continue;
            KeyLocation.Present cached = candidates.getIfPresent(k);
            if (cached != null) {
                List<Holder> still = cached.holders().stream()
                        .filter(h -> liveIncarnations.contains(h.nodeId() + "#" + h.incarnation())).toList();
                if (!still.isEmpty()) {
                    cacheHits.increment();
                    out.put(k, new KeyLocation.Present(still));
                    continue;
                }
            }
            out.put(k, null); // keeps request order; filled below
            byOwner.computeIfAbsent(Rendezvous.owner(k, v.live()), o -> new ArrayList<>()).add(k);
        }
        long timeoutMillis = Math.max(1, deadline.toMillis());
        List<CompletableFuture<Void>> calls = new ArrayList<>();
        for (var e : byOwner.entrySet()) {
            List<StateKey> batch = e.getValue();
            calls.add(call(e.getKey(), batch, v, timeoutMillis)
                    .orTimeout(timeoutMillis, java.util.concurrent.TimeUnit.MILLISECONDS)
                    .handle((answers, failure) -> {
                        synchronized (out) {
                            for (int i = 0; i < batch.size(); i++) {
                                KeyLocation loc = failure != null || answers.size() != batch.size()
                                        ? unknown(reasonOf(failure)) : answers.get(i);
                                if (loc instanceof KeyLocation.Present p) candidates.put(batch.get(i), p);
                                if (loc instanceof KeyLocation.Unknown u && failure == null) unknown.get(u.reason()).increment();
                                out.put(batch.get(i), loc);
                            }
                        }
                        return null;
                    }));
        }
        return CompletableFuture.allOf(calls.toArray(CompletableFuture[]::new)).thenApply(x -> {
            latency.record(Duration.ofNanos(System.nanoTime() - t0));
            synchronized (out) {
                return java.util.Collections.unmodifiableMap(new LinkedHashMap<>(out));
            }
        });
    }

    /**
     * The transport's lookup on {@code owner}. A failed call is an outcome (the keys are Unknown);
     * a call that throws instead of failing its future is a bug, counted, and answered the same.
     */
    private CompletableFuture<List<KeyLocation>> call(Member owner, List<StateKey> batch, MembershipView v, long timeoutMillis) {
        try {
            return transport.lookup(owner, batch, v.live(), v.digest(), timeoutMillis);
        } catch (RuntimeException e) {
            UnexpectedErrors.record(UnexpectedErrors.Layer.CLUSTER, "CatalogLookups.lookup", "unknown keys (UNREACHABLE)", e);
            return CompletableFuture.failedFuture(e);
        }
    }

    private static KeyLocation.UnknownReason reasonOf(Throwable failure) {
        Throwable t = failure;
        while (t != null) {
            if (t instanceof TimeoutException) return KeyLocation.UnknownReason.TIMED_OUT;
            t = t.getCause();
        }
        return KeyLocation.UnknownReason.UNREACHABLE;
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
        if (hit == null) return Optional.empty();
        List<Holder> still = hit.holders().stream().filter(h -> v.live().stream()
                .anyMatch(m -> m.nodeId().equals(h.nodeId()) && m.incarnation() == h.incarnation())).toList();
        return still.isEmpty() ? Optional.empty() : Optional.of(new KeyLocation.Present(still));
    }

    /** Drops every cached candidate (after membership changes, or in tests). */
    public void invalidateCandidates() {
        candidates.invalidateAll();
    }
}
