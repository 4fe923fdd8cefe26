package io.orbitkv.core.peer;

import io.orbitkv.core.catalog.CatalogLookups;
import io.orbitkv.core.catalog.Holder;
import io.orbitkv.core.catalog.KeyLocation;
import io.orbitkv.core.catalog.Member;
import io.orbitkv.core.catalog.MembershipView;
import io.orbitkv.core.log.UnexpectedErrors;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

/**
 * {@link PeerPages.Candidates} from the embedded catalog, without blocking the query path: a
 * key's candidates are the catalog's <em>cached</em> positive answer; a key with none is answered
 * "no candidate" now and, through {@link #known}, starts a background lookup (batched, bounded),
 * so a later QUERY (or poll) of the same key finds the peer. {@link #cached} starts none: the
 * query planner's caller asks for all of its missing pages at once ({@link #discover}).
 *
 * <p>Borrows the {@link CatalogLookups} and the view; owns the set of keys being looked up (at
 * most {@code lookupKeysInFlight}) and one queue of keys waiting for the next batch.
 *
 * <p>Thread model: thread-safe; {@link #known} is called under a session's lock and only reads
 * the cache and enqueues. At most one lookup batch is in flight; keys arriving meanwhile join the
 * next batch, sent when the current one completes (on the transport's thread).
 *
 * <p>Invariants: this Manager is never its own candidate (a locally evicted page is a miss, not a
 * peer read from itself); a candidate names the holder's live endpoint and incarnation from the
 * same view; evidence carries no generation, so candidates ask for
 * {@link AuthorizeRequest#CURRENT_GENERATION} (the source still checks incarnation, namespace and
 * residency sequence, and the payload's CRC32C is verified end to end).
 *
 * <p>Design note: blocking QUERY on the lookup would add one catalog round trip (~0.3–1 ms on
 * loopback, up to the lookup deadline when a shard owner is slow) to every miss, holding the
 * session lock. Answering from the cache costs the first reader of a remote page one recompute
 * (or one more poll) and keeps QUERY's latency independent of the network. With 4,096 keys in
 * flight at most, a burst of misses costs at most one batch RPC per shard owner per round.
 */
public final class CatalogCandidates implements PeerPages.Candidates {

    /** Keys being looked up or queued at once (32 bytes each plus set overhead: ~0.5 MB). */
    public static final int DEFAULT_LOOKUP_KEYS_IN_FLIGHT = 4_096;

    private final CatalogLookups lookups;
    private final Supplier<MembershipView> view;
    private final String selfNodeId;
    private final Duration lookupDeadline;
    private final int lookupKeysInFlight;
    private final Set<StateKey> inFlight = ConcurrentHashMap.newKeySet();
    private final ConcurrentLinkedQueue<StateKey> queued = new ConcurrentLinkedQueue<>();
    private final AtomicBoolean batchRunning = new AtomicBoolean();
    private final AtomicLong lookupsStarted = new AtomicLong();
    private final AtomicLong lookupsSkipped = new AtomicLong();
    /** Keys of {@link #discover} batches in flight (they share {@code lookupKeysInFlight}). */
    private final AtomicInteger discovering = new AtomicInteger();

    public CatalogCandidates(CatalogLookups lookups, Supplier<MembershipView> view, String selfNodeId,
                             Duration lookupDeadline, int lookupKeysInFlight) {
        this.lookups = Objects.requireNonNull(lookups, "lookups");
        this.view = Objects.requireNonNull(view, "view");
        this.selfNodeId = Objects.requireNonNull(selfNodeId, "selfNodeId");
        this.lookupDeadline = Objects.requireNonNull(lookupDeadline, "lookupDeadline");
        if (lookupKeysInFlight <= 0) throw new IllegalArgumentException("lookupKeysInFlight: " + lookupKeysInFlight);
        this.lookupKeysInFlight = lookupKeysInFlight;
    }

    @Override
    public List<PeerCandidate> known(StateKey key, NamespaceDigest namespace) {
        return candidates(key, namespace, true);
    }

    @Override
    public List<PeerCandidate> cached(StateKey key, NamespaceDigest namespace) {
        return candidates(key, namespace, false);
    }

    private List<PeerCandidate> candidates(StateKey key, NamespaceDigest namespace, boolean lookUpUnknown) {
        MembershipView v = view.get();
        if (!v.valid()) return List.of();
        Optional<KeyLocation.Present> cached = lookups.cached(key);
        if (cached.isEmpty()) {
            if (lookUpUnknown) startLookup(key);
            return List.of();
        }
        List<PeerCandidate> out = new ArrayList<>();
        for (Holder h : cached.get().holders()) {
            if (h.nodeId().equals(selfNodeId)) continue;
            Optional<Member> m = MembershipMembers.member(v, h.nodeId()).filter(x -> x.incarnation() == h.incarnation());
            if (m.isEmpty()) continue;
            PeerMedium medium = switch (h.medium()) {
                case DRAM -> PeerMedium.DRAM;
                case SSD -> PeerMedium.SSD;
            };
            out.add(new PeerCandidate(new PeerEndpoint(new NodeIncarnation(h.nodeId(), h.incarnation()), m.get().endpoint()),
                    key, namespace, medium, AuthorizeRequest.CURRENT_GENERATION, h.sequence(), h.lengthBytes()));
        }
        return out;
    }

    /**
     * Looks {@code keys} up in one batch now, outside the background queue (a QUERY that may wait
     * for peers asks for its whole missing prefix at once); the answers land in the catalog's
     * candidate cache, read by {@link #known}. Completes when every shard owner answered or at
     * the lookup deadline, never exceptionally. These keys count against the same
     * {@code lookupKeysInFlight} as the background queue: a batch that does not fit is cut to its
     * first keys (the prefix, in page order), and the keys left out are counted as skipped.
     */
    @Override
    public CompletableFuture<Void> discover(List<StateKey> keys) {
        if (keys.isEmpty() || !view.get().valid()) return CompletableFuture.completedFuture(null);
        int taken = takeDiscoverySlots(keys.size());
        if (taken < keys.size()) lookupsSkipped.addAndGet(keys.size() - taken);
        if (taken == 0) return CompletableFuture.completedFuture(null);
        lookupsStarted.incrementAndGet();
        List<StateKey> batch = keys.subList(0, taken);
        return lookup(batch).thenApply(answers -> {
            discovering.addAndGet(-taken);
            return null;
        });
    }

    /** Reserves up to {@code wanted} of the keys still free under {@code lookupKeysInFlight}. */
    private int takeDiscoverySlots(int wanted) {
        for (;;) {
            int now = discovering.get();
            int free = lookupKeysInFlight - now - inFlight.size();
            int taken = Math.max(0, Math.min(wanted, free));
            if (taken == 0 || discovering.compareAndSet(now, now + taken)) return taken;
        }
    }

    private void startLookup(StateKey key) {
        if (inFlight.size() + discovering.get() >= lookupKeysInFlight) {
            lookupsSkipped.incrementAndGet();
            return;
        }
        if (!inFlight.add(key)) return;
        queued.add(key);
        sendBatch();
    }

    private void sendBatch() {
        if (!batchRunning.compareAndSet(false, true)) return;
        List<StateKey> batch = new ArrayList<>();
        for (StateKey k; (k = queued.poll()) != null; ) batch.add(k);
        if (batch.isEmpty()) {
            batchRunning.set(false);
            if (!queued.isEmpty()) sendBatch();
            return;
        }
        lookupsStarted.incrementAndGet();
        lookup(batch).thenRun(() -> {
            batch.forEach(inFlight::remove);
            batchRunning.set(false);
            if (!queued.isEmpty()) sendBatch();
        });
    }

    /**
     * The lookup of {@code batch}; it answers unreachable owners as Unknown keys, so a throw or an
     * exceptional future is a bug, counted and answered as no answer (the keys' slots are freed
     * either way, so the background queue never stalls behind a failed batch).
     */
    private CompletableFuture<Map<StateKey, KeyLocation>> lookup(List<StateKey> batch) {
        return PeerBoundary.call(UnexpectedErrors.Layer.CLUSTER, "CatalogCandidates.lookup", "no answer (keys stay unknown)",
                Map.of(), () -> lookups.lookup(batch, lookupDeadline));
    }

    /** Lookup batches sent so far. */
    public long lookupsStarted() {
        return lookupsStarted.get();
    }

    /** Keys not looked up because {@code lookupKeysInFlight} were already pending. */
    public long lookupsSkipped() {
        return lookupsSkipped.get();
    }

    /** Keys being looked up or queued now, background and discovery batches together. */
    public int lookupKeysInFlight() {
        return inFlight.size() + discovering.get();
    }
}
