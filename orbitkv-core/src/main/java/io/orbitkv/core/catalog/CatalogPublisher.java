package io.orbitkv.core.catalog;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.core.log.RateLimitedLog;
import io.orbitkv.core.log.UnexpectedErrors;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.state.StateKey;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.SplittableRandom;
import java.util.function.Function;
import java.util.random.RandomGenerator;

/**
 * The source side of the embedded catalog: reads this node's {@link ResidencyStream}, keeps a
 * {@link ResidencyMirror}, and streams each key's changes to each of the key's R shard owners
 * (top-R rendezvous over the live view, {@link Rendezvous#owners}), as a snapshot followed by
 * deltas, one stream per owner.
 *
 * <p>Owns the mirror and one {@link OwnerStream} per live owner, each with a bounded journal of
 * deltas not yet acknowledged. Thread model: {@link #pump} is called by one publisher thread (a
 * daemon's catalog loop); within a pump each owner stream is drained by its own virtual thread
 * (a stream is touched by one thread at a time; the mirror is read-only meanwhile, and the
 * executor's close is the happens-before edge back to the publisher); gauges read sizes racily. Invariants: per owner at most one batch is in
 * flight and at most {@link Budgets#maxBatchesPerPump} are sent per pump; after a failed push an
 * owner gets no push until its backoff ends (bounded exponential with jitter, reset by any
 * answer); a journal never exceeds
 * {@link Budgets#journalDeltas} (overflow drops it and schedules a snapshot); no remote work is
 * done from an invalid view; any change of the live set, a re-registration of this node
 * ({@link MembershipView#registrations()}), an owner's restart or loss of this source's state
 * (NEED_SNAPSHOT, WRONG_OWNER_INCARNATION, also to an idle probe) or a local stream gap resends a
 * snapshot. A drain that throws (a bug: push failures are values) is counted in
 * {@code orbitkv_unexpected_errors_total{layer="cluster"}} and treated as a failed push, so one
 * owner's bug neither stops the publisher nor spins it.
 *
 * <p>Handoff: a membership change does not resend a snapshot to an owner whose stream was caught
 * up (a snapshot clears the owner's table, so every key of this source answered Unknown there
 * until it ended). The keys that owner gains under the new placement are appended to its journal
 * as ADDED deltas, those it loses as REMOVED ones ({@link HandoffPlan}), and the batch completing
 * them carries {@link PushBatch#handoffEnd()}: the owner keeps answering the keys it kept
 * throughout, and gives no "absent" for this source until the end. A new owner, a restarted one,
 * or a stream that was not caught up gets a snapshot as before; so does a handoff larger than
 * {@link Budgets#handoffDeltas} (counted). Snapshot and handoff batches together are paced by
 * {@link Budgets#resyncBytesPerSecond} (estimated at {@link #DELTA_WIRE_BYTES} per delta), so a
 * membership change of a 1 M-key source does not flood the owners' links.
 *
 * <p>Design note: batches of
 * {@link Budgets#maxBatchDeltas} (1,024 × ~60 bytes ≈ 60 KiB) keep a gRPC message far below the
 * 8 MiB cap and amortize per-call cost (~100 µs on loopback).
 *
 * <p>Backoff: a push that fails (timeout, refused call, unreachable owner) used to be retried at
 * the next pump, which runs at once when work is left: 1,000–13,000 failing RPCs per second
 * toward a frozen or wrong-token owner. Now the n-th consecutive failure toward an owner waits a
 * uniformly drawn time in [d/2, d], d = min({@link Budgets#backoffMaxMillis},
 * {@link Budgets#backoffInitialMillis} × 2^(n−1)) (50 ms doubling to 5 s by default: 0.2–0.4
 * pushes per second per failing owner once saturated, and a recovered owner is found within 5 s);
 * the jitter keeps the sources of a cluster from retrying in step. Any answer of the owner
 * (applied or a refusal) resets it.
 *
 * <p>Resync: a node whose etcd lease expired while it lived (paused 10 s past a 5 s TTL) vanished
 * from the owners' views, and they dropped its tables; it re-registered with the same incarnation,
 * so the live set and the view digest could look unchanged to it, it sent no snapshot, and its
 * earlier keys stayed Unknown(NOT_CAUGHT_UP) at an owner until it happened to push there again
 * (30–60 s and more in a three-node test). Two rules close this: a
 * change of {@link MembershipView#registrations()} resends a snapshot to every owner at once; and
 * an owner that got nothing for {@link Budgets#probeIdleMillis} (1 s) gets an empty batch, which it
 * answers NEED_SNAPSHOT if it lost this source's state for any reason (one small RPC per owner per
 * second while idle).
 */
public final class CatalogPublisher {

    /** Estimated wire size of one delta (32-byte key, medium, sequence, length, framing). */
    public static final int DELTA_WIRE_BYTES = 48;

    /**
     * @param maxBatchDeltas     deltas per pushed batch
     * @param journalDeltas      unacknowledged deltas kept per owner before falling back to a snapshot
     * @param maxBatchesPerPump  batches sent per owner per pump (snapshots continue next pump)
     * @param pushTimeoutMillis  deadline of one push
     * @param readEvents         residency events read per pump
     * @param backoffInitialMillis wait bound after a first failed push to an owner
     * @param backoffMaxMillis   largest wait bound after consecutive failures
     * @param probeIdleMillis    an owner that got no push for this long gets an empty batch (a probe)
     * @param handoffDeltas      deltas one owner's handoff may carry; a larger one is a snapshot
     * @param resyncBytesPerSecond pace of snapshot and handoff batches, all owners together
     */
    public record Budgets(int maxBatchDeltas, int journalDeltas, int maxBatchesPerPump, long pushTimeoutMillis,
                          int readEvents, long backoffInitialMillis, long backoffMaxMillis, long probeIdleMillis,
                          int handoffDeltas, long resyncBytesPerSecond) {
        public Budgets {
            if (maxBatchDeltas < 1 || journalDeltas < 1 || maxBatchesPerPump < 1 || pushTimeoutMillis < 1 || readEvents < 1
                    || backoffInitialMillis < 1 || backoffMaxMillis < backoffInitialMillis || probeIdleMillis < 1
                    || handoffDeltas < 0 || resyncBytesPerSecond < 1) {
                throw new IllegalArgumentException("publisher budgets must be positive (backoff max >= initial)");
            }
        }

        /** Budgets with the default handoff bound (1 Mi deltas) and resync pace (64 MiB/s). */
        public Budgets(int maxBatchDeltas, int journalDeltas, int maxBatchesPerPump, long pushTimeoutMillis,
                       int readEvents, long backoffInitialMillis, long backoffMaxMillis, long probeIdleMillis) {
            this(maxBatchDeltas, journalDeltas, maxBatchesPerPump, pushTimeoutMillis, readEvents, backoffInitialMillis,
                    backoffMaxMillis, probeIdleMillis, 1 << 20, 64L << 20);
        }

        /** Budgets with the default push backoff (50 ms to 5 s) and idle probe (1 s). */
        public Budgets(int maxBatchDeltas, int journalDeltas, int maxBatchesPerPump, long pushTimeoutMillis, int readEvents) {
            this(maxBatchDeltas, journalDeltas, maxBatchesPerPump, pushTimeoutMillis, readEvents, 50, 5_000, 1_000);
        }

        public static Budgets defaults() {
            return new Budgets(1024, 65_536, 64, 2_000, 65_536, 50, 5_000, 1_000, 1 << 20, 64L << 20);
        }
    }

    /** One stream to one shard-owner incarnation. */
    private static final class OwnerStream {
        Member owner;
        long ownerIncarnation;
        boolean needSnapshot = true;
        /** Snapshot being sent: what is left of it; null when none is in progress. */
        ArrayDeque<ResidencyEvent> snapshotLeft;
        long nextBatch = 1;
        final ArrayDeque<ResidencyEvent> journal = new ArrayDeque<>();
        /** Consecutive failed pushes; 0 = not backing off. */
        int failures;
        /** No push before this time (valid while {@code failures > 0}). */
        long retryAtNanos;
        /** When the owner last answered a push. */
        long lastAnswerNanos;
        /** Journal entries to acknowledge before the handoff ends; -1 = no handoff under way. */
        long handoffLeft = -1;

        OwnerStream(Member owner) {
            this.owner = owner;
            this.ownerIncarnation = owner.incarnation();
        }
    }

    private final String nodeId;
    private final long incarnation;
    private final ResidencyStream stream;
    private final Function<ResidencyEvent.Medium, List<StateKey>> residentKeys;
    private final CatalogTransport transport;
    private final Budgets budgets;
    private final int replicas;
    private final ResyncPace pace;
    private final ResidencyMirror mirror = new ResidencyMirror();
    /** Concurrent only so the journal gauge can iterate it; written by the publisher thread alone. */
    private final Map<String, OwnerStream> streams = new java.util.concurrent.ConcurrentHashMap<>();
    private long nextSequence = 1;
    private long viewDigest;
    private long registrations;
    private List<Member> live = List.of();
    private volatile boolean stale;
    private final Counter deltasSent;
    private final Counter snapshotsSent;
    private final Counter journalOverflows;
    private final Counter localGaps;
    private final Counter pushFailures;
    private final Counter pushBackoffs;
    private final Counter handoffsSent;
    private final Counter handoffDeltas;
    private final Counter handoffOverflows;
    private final RandomGenerator jitter;
    private final RateLimitedLog failureLog = RateLimitedLog.tenSeconds(CatalogPublisher.class.getName());

    public CatalogPublisher(String nodeId, long incarnation, ResidencyStream stream,
                            Function<ResidencyEvent.Medium, List<StateKey>> residentKeys, CatalogTransport transport,
                            Budgets budgets, MeterRegistry registry) {
        this(nodeId, incarnation, stream, residentKeys, transport, budgets, registry, new SplittableRandom());
    }

    /** As above, drawing backoff jitter from {@code jitter} (tests pass a seeded one). */
    public CatalogPublisher(String nodeId, long incarnation, ResidencyStream stream,
                            Function<ResidencyEvent.Medium, List<StateKey>> residentKeys, CatalogTransport transport,
                            Budgets budgets, MeterRegistry registry, RandomGenerator jitter) {
        this(nodeId, incarnation, stream, residentKeys, transport, budgets, 1, registry, jitter);
    }

    /** As above, placing each key on {@code replicas} owners (≥ 1; the daemon's default is 2). */
    public CatalogPublisher(String nodeId, long incarnation, ResidencyStream stream,
                            Function<ResidencyEvent.Medium, List<StateKey>> residentKeys, CatalogTransport transport,
                            Budgets budgets, int replicas, MeterRegistry registry, RandomGenerator jitter) {
        if (replicas < 1) throw new IllegalArgumentException("catalog replicas must be >= 1: " + replicas);
        this.replicas = replicas;
        this.jitter = Objects.requireNonNull(jitter, "jitter");
        this.nodeId = Member.requireNodeId(nodeId);
        this.incarnation = incarnation;
        this.stream = Objects.requireNonNull(stream, "stream");
        this.residentKeys = Objects.requireNonNull(residentKeys, "residentKeys");
        this.transport = Objects.requireNonNull(transport, "transport");
        this.budgets = Objects.requireNonNull(budgets, "budgets");
        this.deltasSent = Counter.builder("orbitkv_catalog_deltas_sent").description("residency deltas acknowledged by shard owners").register(registry);
        this.snapshotsSent = Counter.builder("orbitkv_catalog_snapshots_sent").description("snapshots completed to shard owners").register(registry);
        this.journalOverflows = Counter.builder("orbitkv_catalog_journal_overflows").description("owner journals dropped for a snapshot").register(registry);
        this.localGaps = Counter.builder("orbitkv_catalog_local_stream_gaps").description("residency stream gaps (mirror rebuilt from the tiers)").register(registry);
        this.pushFailures = Counter.builder("orbitkv_catalog_push_failures").description("pushes that failed or timed out").register(registry);
        this.pushBackoffs = Counter.builder("orbitkv_catalog_push_backoffs").description("backoff waits begun after a failed push").register(registry);
        Gauge.builder("orbitkv_catalog_owners_backing_off", this, CatalogPublisher::backingOff).description("shard owners no push goes to until their backoff ends").register(registry);
        Gauge.builder("orbitkv_catalog_journal_deltas", this, CatalogPublisher::journalSize).description("unacknowledged deltas in all owner journals").register(registry);
        Gauge.builder("orbitkv_catalog_journal_bound_deltas", budgets, b -> b.journalDeltas()).description("bound of each owner journal").register(registry);
        this.handoffsSent = Counter.builder("orbitkv_catalog_handoffs_sent").description("handoffs completed to shard owners after a membership change").register(registry);
        this.handoffDeltas = Counter.builder("orbitkv_catalog_handoff_deltas").description("keys handed to (ADDED) or taken from (REMOVED) owners by handoffs").register(registry);
        this.handoffOverflows = Counter.builder("orbitkv_catalog_handoff_overflows").description("handoffs over their bound, sent as snapshots").register(registry);
        Gauge.builder("orbitkv_catalog_handoff_bound_deltas", budgets, b -> b.handoffDeltas()).description("bound of one owner's handoff").register(registry);
        Gauge.builder("orbitkv_catalog_snapshot_pending_deltas", this, CatalogPublisher::snapshotLeft).description("snapshot deltas not yet acknowledged, all owners").register(registry);
        this.pace = new ResyncPace(budgets.resyncBytesPerSecond(), (long) budgets.maxBatchDeltas() * DELTA_WIRE_BYTES, registry);
    }

    /** True once a shard owner refused this incarnation as stale: a newer one of this node runs. */
    public boolean stale() {
        return stale;
    }

    /** Keys in this node's mirror (for /status and tests). */
    public int mirroredKeys() {
        return mirror.size();
    }

    private double backingOff() {
        long n = 0;
        for (OwnerStream s : streams.values()) if (s.failures > 0) n++;
        return n;
    }

    private double snapshotLeft() {
        long n = 0;
        for (OwnerStream s : streams.values()) {
            ArrayDeque<ResidencyEvent> left = s.snapshotLeft;
            if (left != null) n += left.size();
        }
        return n;
    }

    private double journalSize() {
        long n = 0;
        for (OwnerStream s : streams.values()) n += s.journal.size();
        return n;
    }

    /**
     * One round at {@code nowNanos}: read new residency events, route them, and push to every
     * owner not backing off. Blocks up to about {@link Budgets#pushTimeoutMillis} ×
     * {@link Budgets#maxBatchesPerPump} on slow owners.
     *
     * @return true when nothing is left to do now: every owner is caught up or waiting out a
     *         backoff or the resync pace ({@link Budgets#resyncBytesPerSecond}), and the
     *         residency stream was read to its end (a backlog over {@link Budgets#readEvents}
     *         takes several pumps, and a pump that left events unread is not idle); also from
     *         an invalid view or a stale incarnation, which can send nothing (the publish loop
     *         used to get false there and turn again at once, without its poll interval, for as
     *         long as etcd was unreachable); the caller may then sleep until its next poll
     */
    public boolean pump(MembershipView view, long nowNanos) {
        boolean readAll = readLocal();
        if (stale) return true; // a newer incarnation of this node streams; this one never will again
        if (!view.valid() || view.live().isEmpty()) {
            streams.values().forEach(this::resetForSnapshot);
            return readAll; // nothing can be sent until the view is valid again
        }
        if (view.digest() != viewDigest || !live.equals(view.live()) || view.registrations() != registrations) {
            onMembership(view);
        }
        // owners are drained in parallel (one virtual thread each), so a slow or dead owner delays
        // only its own stream; the mirror and the live list are only read while they run
        Map<OwnerStream, Future<Boolean>> drains = new HashMap<>();
        try (ExecutorService perOwner = Executors.newVirtualThreadPerTaskExecutor()) {
            for (OwnerStream s : streams.values()) {
                if (s.failures > 0 && nowNanos - s.retryAtNanos < 0) continue; // backing off: nothing to do now
                drains.put(s, perOwner.submit(() -> drain(s, nowNanos)));
            }
        }
        boolean idle = readAll;
        for (Map.Entry<OwnerStream, Future<Boolean>> d : drains.entrySet()) {
            Future<Boolean> f = d.getValue();
            if (f.state() == Future.State.SUCCESS) {
                idle &= f.resultNow();
            } else {
                // a push failure is a value inside drain: a throw is a bug; the owner restarts
                // from a snapshot after a backoff, as after a failed push, and the others go on
                OwnerStream s = d.getKey();
                UnexpectedErrors.record(UnexpectedErrors.Layer.CLUSTER, "CatalogPublisher.drain",
                        "a failed push (snapshot resent after a backoff)", f.exceptionNow());
                resetForSnapshot(s);
                backOff(s, nowNanos);
            }
        }
        return idle;
    }

    /** Reads up to {@link Budgets#readEvents} events; true when none is left unread (as of now). */
    private boolean readLocal() {
        ResidencyStream.Batch batch = stream.readFrom(nextSequence, budgets.readEvents());
        if (batch.gap()) {
            localGaps.increment();
            rebuildMirror();
        } else {
            for (ResidencyEvent e : batch.events()) {
                // a key held in two namespaces: only its first image added and last removed go out
                if (mirror.apply(e)) route(e);
            }
            nextSequence = batch.nextSequence();
        }
        return nextSequence > stream.lastSequence();
    }

    /** After a gap: the tiers' keys as of now, then the stream from the sequence read first. */
    private void rebuildMirror() {
        long upTo = stream.lastSequence();
        long seq = Math.max(1, upTo);
        ResidencyMirror fresh = new ResidencyMirror();
        for (ResidencyEvent.Medium m : ResidencyEvent.Medium.values()) {
            for (StateKey k : residentKeys.apply(m)) fresh.apply(new ResidencyEvent(seq, k, m, ResidencyEvent.Kind.ADDED, 0));
        }
        mirror.replaceWith(fresh);
        nextSequence = upTo + 1;
        streams.values().forEach(this::resetForSnapshot);
    }

    private void route(ResidencyEvent e) {
        if (live.isEmpty()) return;
        for (Member owner : Rendezvous.owners(e.key(), live, replicas)) {
            OwnerStream s = streams.get(owner.nodeId());
            if (s == null || s.needSnapshot) continue; // the snapshot, not taken yet, will carry it
            if (s.journal.size() - Math.max(0, s.handoffLeft) >= budgets.journalDeltas()) {
                journalOverflows.increment();
                resetForSnapshot(s);
                continue;
            }
            s.journal.add(e);
        }
    }

    /** Starts the next backoff wait of {@code s}; returns its length in ms. */
    private long backOff(OwnerStream s, long nowNanos) {
        s.failures++;
        int doublings = Math.min(s.failures - 1, 30);
        long bound = Math.min(budgets.backoffMaxMillis(), budgets.backoffInitialMillis() << doublings);
        long waitMillis = bound / 2 + jitter.nextLong(bound - bound / 2 + 1);
        s.retryAtNanos = nowNanos + waitMillis * 1_000_000L;
        pushBackoffs.increment();
        return waitMillis;
    }

    private void onMembership(MembershipView view) {
        List<Member> before = live;
        // a re-registration of this node means owners may have dropped its tables: snapshot all
        boolean handOff = view.registrations() == registrations && !before.isEmpty();
        live = view.live();
        viewDigest = view.digest();
        registrations = view.registrations();
        Map<String, Member> byId = new HashMap<>();
        for (Member m : live) byId.put(m.nodeId(), m);
        streams.keySet().retainAll(byId.keySet());
        List<String> handoffTo = new ArrayList<>();
        for (Member m : live) {
            OwnerStream s = streams.computeIfAbsent(m.nodeId(), id -> new OwnerStream(m));
            boolean caughtUp = handOff && s.owner.equals(m) && s.ownerIncarnation == m.incarnation() && !s.needSnapshot
                    && s.snapshotLeft == null && s.handoffLeft < 0;
            if (!s.owner.equals(m)) s.failures = 0; // another process (or address) of that node: no backoff carried over
            s.owner = m;
            s.ownerIncarnation = m.incarnation();
            if (caughtUp) handoffTo.add(m.nodeId());
            else resetForSnapshot(s);
        }
        if (handoffTo.isEmpty()) return;
        Map<String, List<ResidencyEvent>> plan = HandoffPlan.moves(mirror, before, live, replicas, handoffTo, budgets.handoffDeltas());
        for (String id : handoffTo) {
            OwnerStream s = streams.get(id);
            List<ResidencyEvent> moves = plan.get(id);
            if (moves == null) { // over the bound: a snapshot is cheaper to reason about than a partial handoff
                handoffOverflows.increment();
                resetForSnapshot(s);
                continue;
            }
            s.journal.addAll(moves);
            handoffDeltas.increment(moves.size());
            s.handoffLeft = s.journal.size(); // the journal's older deltas go first, then the moves, then the end flag
        }
    }

    private void resetForSnapshot(OwnerStream s) {
        s.needSnapshot = true;
        s.snapshotLeft = null;
        s.handoffLeft = -1;
        s.journal.clear();
    }

    /** Sends up to the per-pump budget of batches to one owner; true when nothing is left. */
    private boolean drain(OwnerStream s, long nowNanos) {
        for (int i = 0; i < budgets.maxBatchesPerPump(); i++) {
            boolean begin = false;
            if ((s.needSnapshot || s.snapshotLeft != null || s.handoffLeft > 0) && !pace.ready(nowNanos)) {
                return true; // paced: the rest of the snapshot or handoff goes in a later pump
            }
            if (s.needSnapshot) {
                Member owner = s.owner;
                s.snapshotLeft = new ArrayDeque<>(mirror.snapshot(k -> Rendezvous.isOwner(k, live, replicas, owner.nodeId())));
                s.needSnapshot = false;
                s.nextBatch = 1;
                begin = true;
            }
            List<ResidencyEvent> deltas = new ArrayList<>();
            ArrayDeque<ResidencyEvent> from = s.snapshotLeft != null ? s.snapshotLeft : s.journal;
            for (ResidencyEvent e : from) {
                if (deltas.size() == budgets.maxBatchDeltas()) break;
                deltas.add(e);
            }
            boolean end = s.snapshotLeft != null && deltas.size() == s.snapshotLeft.size();
            boolean handoffEnd = s.snapshotLeft == null && s.handoffLeft >= 0 && deltas.size() >= s.handoffLeft;
            boolean probeDue = nowNanos - s.lastAnswerNanos >= budgets.probeIdleMillis() * 1_000_000L;
            if (!begin && !handoffEnd && deltas.isEmpty() && (s.snapshotLeft != null || !probeDue)) return true;
            // else: an empty batch probes whether the owner still holds this source's state
            if (s.snapshotLeft != null || s.handoffLeft > 0) pace.spend((long) deltas.size() * DELTA_WIRE_BYTES);
            PushBatch batch = new PushBatch(nodeId, incarnation, s.ownerIncarnation, s.nextBatch, begin, end, viewDigest,
                    deltas, handoffEnd);
            PushBatch.Reply reply;
            try {
                reply = transport.push(s.owner, batch, budgets.pushTimeoutMillis()).join();
            } catch (CompletionException | java.util.concurrent.CancellationException e) {
                pushFailures.increment();
                if (s.snapshotLeft != null) resetForSnapshot(s); // a lost snapshot batch restarts the snapshot
                long waitMillis = backOff(s, nowNanos);
                failureLog.log(System.Logger.Level.WARNING, s.owner.nodeId(), "catalog push to " + s.owner.nodeId() + "#"
                        + s.ownerIncarnation + " at " + s.owner.endpoint() + " failed (" + s.failures
                        + " in a row, next try in " + waitMillis + " ms): " + (e.getCause() != null ? e.getCause() : e));
                return true; // nothing more to do for this owner until the backoff ends
            }
            s.failures = 0; // the owner answered
            s.lastAnswerNanos = nowNanos;
            switch (reply.result()) {
                case APPLIED -> {
                    for (int n = 0; n < deltas.size(); n++) from.poll();
                    deltasSent.increment(deltas.size());
                    s.nextBatch++;
                    if (from == s.journal && s.handoffLeft >= 0) {
                        s.handoffLeft = handoffEnd ? -1 : s.handoffLeft - deltas.size();
                        if (handoffEnd) handoffsSent.increment();
                    }
                    if (end) {
                        s.snapshotLeft = null;
                        snapshotsSent.increment();
                    }
                }
                case NEED_SNAPSHOT -> resetForSnapshot(s);
                case WRONG_OWNER_INCARNATION -> {
                    s.ownerIncarnation = reply.ownerIncarnation();
                    resetForSnapshot(s);
                }
                case STALE_INCARNATION -> {
                    stale = true;
                    return false;
                }
            }
        }
        return !s.needSnapshot && s.snapshotLeft == null && s.journal.isEmpty() && s.handoffLeft < 0;
    }
}
