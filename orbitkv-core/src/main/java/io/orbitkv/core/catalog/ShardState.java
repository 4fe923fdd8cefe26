package io.orbitkv.core.catalog;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.state.StateKey;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Supplier;

/**
 * The shard owner's side of the embedded catalog: for every source node streaming to this owner,
 * which keys it holds on which medium (as of which residency sequence, with the page's length when
 * the source sent it), and whether that state is
 * complete enough to answer "absent".
 *
 * <p>Owns the per-source tables. Thread model: every method is {@code synchronized} on this
 * object (gRPC handler threads push and look up concurrently; both are short, O(batch) or
 * O(keys × live members)). Invariants: per source, only the newest incarnation seen is kept and
 * an older one is refused ({@link PushBatch.Result#STALE_INCARNATION}); a source's table holds at
 * most {@link Budgets#maxKeysPerSource} keys (more marks it overflowed: lookups then never say
 * absent); at most {@link Budgets#maxSources} sources are tracked; {@link KeyLocation.Absent} is
 * returned only when every member of the requester's live view has a caught-up, non-overflowed
 * source table of that exact incarnation, snapshotted (or handed off) under the same view digest,
 * and that digest is also this owner's own current placement version.
 *
 * <p>Placement: keys are placed on R owners ({@link Rendezvous#owners}); this owner holds what
 * each source placed on it. The placement version is the view digest. A lookup carrying another
 * version than this owner's own valid view is answered {@link KeyLocation.UnknownReason#STALE_PLACEMENT}
 * for every key it holds no evidence for (evidence it holds is still given: a hint the source
 * validates anyway); the requester retries. A source table being handed off after a membership
 * change ({@link PushBatch#handoffEnd()}) keeps its entries (lookups keep finding them) but gives
 * no "absent" until the handoff ends ({@link KeyLocation.UnknownReason#HANDOFF}).
 *
 * <p>Design note: state is rebuilt, never persisted: a restarted owner starts empty with a new
 * incarnation; every source notices (NEED_SNAPSHOT or WRONG_OWNER_INCARNATION, or the view change)
 * and resends a snapshot of what it holds for this owner followed by deltas. Until each live
 * source has finished, lookups are {@link KeyLocation.Unknown}. The alternative, a replicated
 * catalog (Raft per shard), would make each lookup survive an owner restart but costs a write
 * quorum per residency change (~thousands/s per node); rebuilding from the sources costs one
 * snapshot per source per restart (1 M keys × ~50 bytes ≈ 50 MB, well under a second on loopback).
 */
public final class ShardState {

    /**
     * @param maxSources       source nodes tracked at once (a cluster bigger than this is refused)
     * @param maxKeysPerSource keys kept per source, about 100 bytes of heap each
     */
    public record Budgets(int maxSources, int maxKeysPerSource) {
        public Budgets {
            if (maxSources < 1 || maxKeysPerSource < 1) throw new IllegalArgumentException("budgets must be positive");
        }
    }

    private enum Phase { NEEDS_SNAPSHOT, SNAPSHOTTING, CAUGHT_UP }

    private static final class Source {
        final long incarnation;
        Phase phase = Phase.NEEDS_SNAPSHOT;
        long lastBatch;
        long viewDigest;
        /** A batch under another placement version arrived; the handoff to it has not ended. */
        boolean handingOff;
        boolean overflowed;
        /** key → {DRAM sequence, SSD sequence, length in bytes}; sequence 0 = not resident on that
         *  medium, length 0 = unknown. */
        final Map<StateKey, long[]> entries = new HashMap<>();

        Source(long incarnation) {
            this.incarnation = incarnation;
        }
    }

    private final String ownerNode;
    private final long ownerIncarnation;
    private final Budgets budgets;
    // @GuardedBy("this")
    private final Map<String, Source> sources = new HashMap<>();
    // @GuardedBy("this")
    private long keys;
    private final Counter deltasApplied;
    private final Counter snapshotsBegun;
    private final Counter staleRejected;
    private final Counter needSnapshot;
    private final Counter stalePlacement;
    private final Counter handoffsEnded;
    private final Supplier<MembershipView> ownView;

    /** A shard owner that does not judge placement versions against a view of its own. */
    public ShardState(String ownerNode, long ownerIncarnation, Budgets budgets, MeterRegistry registry) {
        this(ownerNode, ownerIncarnation, budgets, registry, () -> null);
    }

    /**
     * A shard owner judging lookups against {@code ownView} (this node's current membership view;
     * null or invalid = no judgement: the requester's version is taken as is).
     */
    public ShardState(String ownerNode, long ownerIncarnation, Budgets budgets, MeterRegistry registry,
                      Supplier<MembershipView> ownView) {
        this.ownView = Objects.requireNonNull(ownView, "ownView");
        this.stalePlacement = Counter.builder("orbitkv_catalog_stale_placement").tag("side", "owner")
                .description("lookups whose placement version was not this owner's (answered STALE_PLACEMENT)").register(registry);
        this.handoffsEnded = Counter.builder("orbitkv_catalog_handoffs_received").description("source handoffs completed on this shard owner").register(registry);
        this.ownerNode = Member.requireNodeId(ownerNode);
        this.ownerIncarnation = ownerIncarnation;
        this.budgets = Objects.requireNonNull(budgets, "budgets");
        this.deltasApplied = Counter.builder("orbitkv_catalog_deltas_applied").description("residency deltas applied by this shard owner").register(registry);
        this.snapshotsBegun = Counter.builder("orbitkv_catalog_snapshots_received").description("source snapshots begun on this shard owner").register(registry);
        this.staleRejected = Counter.builder("orbitkv_catalog_stale_incarnation_rejected").description("pushes refused from an old source incarnation").register(registry);
        this.needSnapshot = Counter.builder("orbitkv_catalog_need_snapshot").description("pushes answered NEED_SNAPSHOT").register(registry);
        Gauge.builder("orbitkv_catalog_shard_keys", this, ShardState::keyCount).description("keys held for all sources").register(registry);
        Gauge.builder("orbitkv_catalog_shard_keys_bound", budgets, b -> (double) b.maxKeysPerSource() * b.maxSources())
                .description("bound of keys held for all sources").register(registry);
    }

    public long ownerIncarnation() {
        return ownerIncarnation;
    }

    /** Applies one pushed batch (see {@link PushBatch.Result} for each refusal). */
    public synchronized PushBatch.Reply apply(PushBatch b) {
        if (b.ownerIncarnation() != ownerIncarnation) return reply(PushBatch.Result.WRONG_OWNER_INCARNATION);
        Source s = sources.get(b.sourceNode());
        if (s != null && b.sourceIncarnation() < s.incarnation) {
            staleRejected.increment();
            return reply(PushBatch.Result.STALE_INCARNATION);
        }
        if (s == null || b.sourceIncarnation() > s.incarnation) {
            if (s == null && sources.size() >= budgets.maxSources()) return reply(PushBatch.Result.NEED_SNAPSHOT);
            if (s != null) keys -= s.entries.size();
            s = new Source(b.sourceIncarnation());
            sources.put(b.sourceNode(), s);
        }
        if (b.snapshotBegin()) {
            snapshotsBegun.increment();
            keys -= s.entries.size();
            s.entries.clear();
            s.overflowed = false;
            s.viewDigest = b.viewDigest();
            s.handingOff = false;
            s.phase = Phase.SNAPSHOTTING;
        } else if (s.phase == Phase.NEEDS_SNAPSHOT || b.batch() != s.lastBatch + 1) {
            s.phase = Phase.NEEDS_SNAPSHOT;
            needSnapshot.increment();
            return reply(PushBatch.Result.NEED_SNAPSHOT);
        } else if (b.handoffEnd()) {
            s.viewDigest = b.viewDigest();
            s.handingOff = false;
            handoffsEnded.increment();
        } else if (b.viewDigest() != s.viewDigest) {
            s.handingOff = true; // keys of a new placement are on their way: evidence, but no "absent" yet
        }
        s.lastBatch = b.batch();
        for (ResidencyEvent e : b.deltas()) applyDelta(s, e);
        deltasApplied.increment(b.deltas().size());
        if (b.snapshotEnd()) s.phase = Phase.CAUGHT_UP;
        return reply(PushBatch.Result.APPLIED);
    }

    private void applyDelta(Source s, ResidencyEvent e) {
        int medium = e.medium().ordinal();
        switch (e.kind()) {
            case ADDED -> {
                long[] seqs = s.entries.get(e.key());
                if (seqs == null) {
                    if (s.entries.size() >= budgets.maxKeysPerSource()) {
                        s.overflowed = true;
                        return;
                    }
                    seqs = new long[3];
                    s.entries.put(e.key(), seqs);
                    keys++;
                }
                seqs[medium] = Math.max(seqs[medium], e.sequence());
                if (e.lengthBytes() > 0) seqs[2] = e.lengthBytes();
            }
            case REMOVED -> {
                long[] seqs = s.entries.get(e.key());
                if (seqs == null || seqs[medium] > e.sequence()) return;
                seqs[medium] = 0;
                if (seqs[0] == 0 && seqs[1] == 0) {
                    s.entries.remove(e.key());
                    keys--;
                }
            }
        }
    }

    private PushBatch.Reply reply(PushBatch.Result r) {
        return new PushBatch.Reply(r, ownerIncarnation);
    }

    private static final ResidencyEvent.Medium[] MEDIA = ResidencyEvent.Medium.values();

    /**
     * Answers each key against the requester's live view: holders among those members (matching
     * incarnations only), else absent with complete coverage, else unknown.
     */
    public synchronized List<KeyLocation> lookup(List<StateKey> keysToFind, List<Member> live, long viewDigest) {
        MembershipView own = ownView.get();
        KeyLocation missing;
        if (own != null && own.valid() && own.digest() != viewDigest) {
            stalePlacement.increment();
            missing = KeyLocation.unknown(KeyLocation.UnknownReason.STALE_PLACEMENT);
        } else {
            missing = coverage(live, viewDigest);
        }
        // the sources that may answer, resolved once per call rather than once per key
        Member[] members = new Member[live.size()];
        Source[] answering = new Source[live.size()];
        int n = 0;
        for (Member m : live) {
            Source s = sources.get(m.nodeId());
            if (s == null || s.incarnation != m.incarnation() || s.phase == Phase.NEEDS_SNAPSHOT) continue;
            members[n] = m;
            answering[n++] = s;
        }
        List<KeyLocation> out = new ArrayList<>(keysToFind.size());
        for (StateKey key : keysToFind) {
            List<Holder> holders = null;
            for (int i = 0; i < n; i++) {
                long[] seqs = answering[i].entries.get(key);
                if (seqs == null) continue;
                for (ResidencyEvent.Medium medium : MEDIA) {
                    long seq = seqs[medium.ordinal()];
                    if (seq <= 0) continue;
                    if (holders == null) holders = new ArrayList<>(2);
                    holders.add(new Holder(members[i].nodeId(), members[i].incarnation(), medium, seq, (int) seqs[2]));
                }
            }
            out.add(holders == null ? missing : new KeyLocation.Present(holders));
        }
        return out;
    }

    private KeyLocation coverage(List<Member> live, long viewDigest) {
        if (live.isEmpty()) return KeyLocation.unknown(KeyLocation.UnknownReason.NOT_CAUGHT_UP);
        for (Member m : live) {
            Source s = sources.get(m.nodeId());
            if (s == null || s.incarnation != m.incarnation() || s.phase != Phase.CAUGHT_UP) {
                return KeyLocation.unknown(KeyLocation.UnknownReason.NOT_CAUGHT_UP);
            }
            if (s.overflowed) return KeyLocation.unknown(KeyLocation.UnknownReason.SOURCE_OVERFLOW);
            if (s.handingOff) return KeyLocation.unknown(KeyLocation.UnknownReason.HANDOFF);
            if (s.viewDigest != viewDigest) return KeyLocation.unknown(KeyLocation.UnknownReason.VIEW_MISMATCH);
        }
        return new KeyLocation.Absent();
    }

    /**
     * Forgets sources that are no longer members (any incarnation), freeing their tables. The
     * newest incarnation of a node that stays a member is kept, so its stale predecessor stays
     * refused.
     */
    public synchronized void retainMembers(List<Member> live) {
        var ids = live.stream().map(Member::nodeId).collect(java.util.stream.Collectors.toSet());
        var it = sources.entrySet().iterator();
        while (it.hasNext()) {
            var e = it.next();
            if (!ids.contains(e.getKey())) {
                keys -= e.getValue().entries.size();
                it.remove();
            }
        }
    }

    /** Keys held for all sources together. */
    public synchronized long keyCount() {
        return keys;
    }

    /** Sources whose snapshot completed (for /status and tests). */
    public synchronized List<String> caughtUpSources() {
        return sources.entrySet().stream().filter(e -> e.getValue().phase == Phase.CAUGHT_UP)
                .map(Map.Entry::getKey).sorted().toList();
    }

    @Override
    public String toString() {
        return "ShardState[" + ownerNode + "#" + ownerIncarnation + "]";
    }
}
