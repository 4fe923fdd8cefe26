package io.orbitkv.server.membership;

import io.etcd.jetcd.ByteSequence;
import io.etcd.jetcd.Client;
import io.etcd.jetcd.KeyValue;
import io.etcd.jetcd.Watch;
import io.etcd.jetcd.common.exception.EtcdException;
import io.etcd.jetcd.kv.GetResponse;
import io.etcd.jetcd.kv.TxnResponse;
import io.etcd.jetcd.lease.LeaseKeepAliveResponse;
import io.etcd.jetcd.op.Cmp;
import io.etcd.jetcd.op.CmpTarget;
import io.etcd.jetcd.op.Op;
import io.etcd.jetcd.options.GetOption;
import io.etcd.jetcd.options.PutOption;
import io.etcd.jetcd.options.WatchOption;
import io.etcd.jetcd.support.CloseableClient;
import io.etcd.jetcd.watch.WatchEvent;
import io.etcd.jetcd.watch.WatchResponse;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.core.catalog.Member;
import io.orbitkv.core.catalog.MembershipView;
import io.orbitkv.core.log.RateLimitedLog;
import io.orbitkv.core.log.UnexpectedErrors;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.LongSupplier;

/**
 * Cluster membership through a real etcd: registers this node ({@code node id → endpoint,
 * incarnation}) under a lease kept alive, watches the members prefix, and publishes a
 * {@link MembershipView} that is valid only while the evidence holds.
 *
 * <p>Owns the etcd client, the lease, the watch, the {@link MemberProofs} and one control thread.
 * Thread model: every state transition (register, re-list, re-watch, health evaluation, proofs)
 * runs on the control thread, every {@link Settings#tick()}; jetcd callbacks only record facts
 * (volatile timestamps, a broken-watch flag) or post events to that thread. {@link #view()} is a
 * volatile read from any thread; etcd is never on a read path. A tick never throws: its failures
 * are counted (tick errors) and age the evidence out; one that is not etcd's is a bug, also
 * counted as an unexpected error (layer {@code cluster}).
 *
 * <p>Invariants: the view is valid only when (1) this incarnation is registered and not
 * superseded, (2) a keep-alive was acknowledged within the lease TTL, and (3) the watch is running
 * from the revision the view was listed at; a lower incarnation than one stored in etcd is never
 * registered (the registration transaction refuses it); another member is in the view only once
 * it proved itself to this node ({@link MemberProofs}), so a member registered with a wrong token
 * never gets a rendezvous share of the keys.
 *
 * <p>Design note: the TTL (default 5 s) bounds how long a dead node stays in others' views and
 * how long this node may act on evidence it can no longer renew: after TTL without an acknowledged
 * keep-alive the lease may have expired in etcd, so remote work stops at the same moment others
 * may drop this node. Repair after a watch break is re-list + re-watch from the listed revision
 * + 1, so no event between the two is missed (etcd watch revisions are gapless).
 */
public final class EtcdMembership implements AutoCloseable {

    /**
     * @param endpoints   etcd client URLs, e.g. {@code http://127.0.0.1:2379}
     * @param clusterId   the cluster's name (the key prefix)
     * @param self        this node's member record (incarnation from {@link EpochFile})
     * @param leaseTtl    lease TTL; also how long without a keep-alive ack the view stays valid
     * @param tick        control-thread period
     * @param rpcTimeout  deadline of each etcd request made by the control thread
     */
    public record Settings(List<String> endpoints, String clusterId, Member self, Duration leaseTtl, Duration tick,
                           Duration rpcTimeout) {
        public Settings {
            endpoints = List.copyOf(endpoints);
            if (endpoints.isEmpty()) throw new IllegalArgumentException("no etcd endpoint");
            Objects.requireNonNull(clusterId, "clusterId");
            Objects.requireNonNull(self, "self");
            if (leaseTtl.toSeconds() < 2) throw new IllegalArgumentException("lease TTL must be >= 2 s");
        }

        public static Settings of(List<String> endpoints, String clusterId, Member self) {
            return new Settings(endpoints, clusterId, self, Duration.ofSeconds(5), Duration.ofMillis(200), Duration.ofSeconds(2));
        }
    }

    /** What the control thread knows; read by {@link #invalidReason}. */
    record Evidence(boolean registered, boolean superseded, long lastKeepAliveAckNanos, boolean watchRunning) {
    }

    /**
     * The health rule, a pure function of the evidence and the time: why the view is invalid, or
     * empty when it is valid.
     */
    static Optional<String> invalidReason(Evidence e, long nowNanos, Duration leaseTtl) {
        if (e.superseded()) return Optional.of("superseded by a newer incarnation of this node");
        if (!e.registered()) return Optional.of("not registered");
        if (nowNanos - e.lastKeepAliveAckNanos() > leaseTtl.toNanos()) return Optional.of("lease not renewed for " + leaseTtl);
        if (!e.watchRunning()) return Optional.of("members watch broken, not yet repaired");
        return Optional.empty();
    }

    /**
     * How long ticks may keep failing before the etcd client is replaced by a fresh one: gRPC waits
     * out an exponential reconnect backoff (1 s growing by 1.6 per attempt, up to 120 s) once a
     * channel failed, so after a 20 s outage the next attempt could come 10 s after etcd is back;
     * a fresh client connects at once.
     */
    static final Duration CLIENT_RENEW_AFTER = Duration.ofSeconds(2);

    private final Settings settings;
    /** Replaced (control thread) after {@link #CLIENT_RENEW_AFTER} of failing ticks; read at close. */
    private volatile Client client;
    private final LongSupplier nanoClock;
    private final ScheduledExecutorService control;
    private final AtomicReference<MembershipView> view = new AtomicReference<>(MembershipView.initial());
    // control-thread state
    private final Map<String, Member> members = new HashMap<>();
    private long revision;
    private long leaseId;
    private CloseableClient keepAlive;
    private Watch.Watcher watcher;
    private volatile boolean registered;
    private volatile boolean superseded;
    private volatile boolean watchBroken = true;
    private volatile boolean leaseBroken = true;
    private volatile long lastKeepAliveAckNanos;
    private volatile String lastError = "";
    /** Registrations of this process so far (control thread writes; published in each view). */
    private volatile long registrations;
    private final Counter watchRepairs;
    private final Counter reRegistrations;
    private final Counter staleRefused;
    private final Counter tickErrors;
    private final Counter clientRenewals;
    /** When the current run of failing ticks began; 0 while ticks succeed. Control thread only. */
    private long failingSinceNanos;
    private final RateLimitedLog tickLog = RateLimitedLog.tenSeconds(EtcdMembership.class.getName());
    /** Which other members proved themselves; control thread only. */
    private final MemberProofs proofs;

    private EtcdMembership(Settings settings, MemberVerifier verifier, LongSupplier nanoClock, MeterRegistry registry) {
        this.settings = settings;
        this.nanoClock = nanoClock;
        this.client = newClient(settings);
        this.control = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "orbitkv-membership");
            t.setDaemon(true);
            return t;
        });
        this.lastKeepAliveAckNanos = nanoClock.getAsLong() - settings.leaseTtl().toNanos() - 1;
        this.watchRepairs = Counter.builder("orbitkv_membership_watch_repairs").description("re-list + re-watch after a broken watch").register(registry);
        this.reRegistrations = Counter.builder("orbitkv_membership_registrations").description("lease grants + registrations").register(registry);
        this.staleRefused = Counter.builder("orbitkv_membership_stale_refused").description("registrations refused: a newer incarnation is stored").register(registry);
        this.clientRenewals = Counter.builder("orbitkv_membership_client_renewals")
                .description("etcd clients replaced after ticks kept failing, so a returning etcd is reached at once").register(registry);
        this.tickErrors = Counter.builder("orbitkv_membership_tick_errors").description("membership ticks that failed to reach etcd (each also logged, rate-limited)").register(registry);
        this.proofs = new MemberProofs(settings.self().nodeId(), verifier, control, this::publish, nanoClock, registry);
        Gauge.builder("orbitkv_membership_valid", view, v -> v.get().valid() ? 1 : 0).description("1 while the view is valid evidence").register(registry);
        Gauge.builder("orbitkv_membership_live", view, v -> v.get().live().size()).description("members in the view").register(registry);
    }

    /**
     * Starts the control loop; the first registration happens on it, so an unreachable etcd does
     * not prevent the Manager from starting (its view stays invalid: local work only).
     */
    public static EtcdMembership start(Settings settings, MeterRegistry registry) {
        return start(settings, MemberVerifier.TRUST_ALL, registry);
    }

    /** As above; a member other than this node is live only once {@code verifier} accepted it. */
    public static EtcdMembership start(Settings settings, MemberVerifier verifier, MeterRegistry registry) {
        EtcdMembership m = new EtcdMembership(settings, verifier, System::nanoTime, registry);
        m.control.scheduleWithFixedDelay(m::tick, 0, settings.tick().toMillis(), TimeUnit.MILLISECONDS);
        return m;
    }

    /**
     * This start's incarnation: the next epoch of {@code stateDir} ({@link EpochFile}), raised
     * above the incarnation etcd holds for {@code nodeId} (read once, within {@code rpcTimeout})
     * when the directory's is not above it, i.e. the directory was wiped or replaced; that is
     * logged at WARNING. Rejoining so is safe only while no process of this node is registered:
     * etcd's key is the highest incarnation this node ever registered, so the new one repeats
     * none, and catalog entries of older ones are ignored (only the view's incarnations count).
     * While this node's member key is live (another process of it runs, or a crashed one's lease
     * has not expired yet: at most the lease TTL) a raised incarnation would supersede that
     * process, so the directory's epoch is kept and the registration is refused as stale (logged
     * then, the view stays invalid), as it is when etcd cannot be reached at start.
     */
    public static long startIncarnation(List<String> endpoints, String clusterId, String nodeId, Path stateDir,
                                        Duration rpcTimeout) throws IOException {
        Stored stored = stored(endpoints, clusterId, nodeId, rpcTimeout);
        long previous = EpochFile.previous(stateDir);
        if (stored.incarnation() <= previous || stored.live()) return EpochFile.next(stateDir);
        long next = EpochFile.nextAbove(stateDir, stored.incarnation());
        System.getLogger(EtcdMembership.class.getName()).log(System.Logger.Level.WARNING, "etcd holds incarnation "
                + stored.incarnation() + " for node " + nodeId + " of cluster " + clusterId + " but "
                + stateDir.resolve(EpochFile.NAME) + (previous == 0 ? " is missing" : " holds " + previous)
                + " (the state directory was wiped or replaced): rejoining as incarnation " + next);
        return next;
    }

    /** What etcd holds for a node at start: its highest incarnation (0 if none) and whether its member key is live. */
    private record Stored(long incarnation, boolean live) {
        static final Stored UNKNOWN = new Stored(0, false);
    }

    /** Reads {@link Stored} in one transaction; {@link Stored#UNKNOWN} if etcd did not answer in time. */
    private static Stored stored(List<String> endpoints, String clusterId, String nodeId, Duration rpcTimeout) {
        try (Client client = Client.builder().endpoints(endpoints.toArray(String[]::new)).connectTimeout(rpcTimeout).build()) {
            ByteSequence incKey = bytes(MembershipRecord.incarnationKey(clusterId, nodeId));
            ByteSequence memberKey = bytes(MembershipRecord.memberKey(clusterId, nodeId));
            TxnResponse read = client.getKVClient().txn()
                    .Then(Op.get(incKey, GetOption.DEFAULT), Op.get(memberKey, GetOption.DEFAULT))
                    .commit().get(rpcTimeout.toMillis(), TimeUnit.MILLISECONDS);
            List<KeyValue> inc = read.getGetResponses().get(0).getKvs();
            boolean live = !read.getGetResponses().get(1).getKvs().isEmpty();
            return new Stored(inc.isEmpty() ? 0 : Long.parseLong(inc.getFirst().getValue().toString(StandardCharsets.UTF_8).strip()), live);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Stored.UNKNOWN;
        } catch (ExecutionException | TimeoutException | EtcdException | StatusRuntimeException e) {
            return Stored.UNKNOWN; // etcd not reached: the registration's transaction still refuses a lower incarnation
        }
    }

    /** The current view (a volatile read; never touches etcd). */
    public MembershipView view() {
        return view.get();
    }

    /** This node's record. */
    public Member self() {
        return settings.self();
    }

    private static Client newClient(Settings settings) {
        return Client.builder().endpoints(settings.endpoints().toArray(String[]::new))
                .connectTimeout(settings.rpcTimeout()).build();
    }

    private void tick() {
        try {
            if (!superseded) {
                if (leaseBroken || !registered) register();
                if (registered && watchBroken) relistAndWatch();
            }
            lastError = "";
            failingSinceNanos = 0;
        } catch (Exception e) {
            // etcd unreachable, slow or refusing (or the loop stopping): evidence ages out below; retried next tick
            lastError = String.valueOf(e);
            tickErrors.increment();
            renewClientIfFailingLong();
            if (e instanceof RuntimeException && !(e instanceof EtcdException || e instanceof StatusRuntimeException)) {
                UnexpectedErrors.record(UnexpectedErrors.Layer.CLUSTER, "EtcdMembership.tick", "a failed tick (retried next tick)", e);
            } else {
                tickLog.log(System.Logger.Level.WARNING, "tick", "etcd at " + settings.endpoints() + " not reached: " + e
                        + "; membership evidence ages out and new remote work stops until it answers (check that etcd runs)");
            }
        }
        publish();
    }

    /**
     * After {@link #CLIENT_RENEW_AFTER} of failing ticks, replaces the client (its watch and
     * keep-alive go with it, so the next tick registers again and re-lists), then waits as long
     * again before another replacement.
     */
    private void renewClientIfFailingLong() {
        long now = nanoClock.getAsLong();
        if (failingSinceNanos == 0) {
            failingSinceNanos = now;
            return;
        }
        if (now - failingSinceNanos < CLIENT_RENEW_AFTER.toNanos()) return;
        failingSinceNanos = now;
        Client old = client;
        try {
            if (watcher != null) watcher.close();
            if (keepAlive != null) keepAlive.close();
        } catch (RuntimeException e) {
            // the old client's streams are broken already; closing the client below ends them
        }
        watcher = null;
        keepAlive = null;
        leaseBroken = true;
        watchBroken = true;
        client = newClient(settings);
        clientRenewals.increment();
        old.close();
    }

    private void publish() {
        Evidence e = new Evidence(registered && !leaseBroken, superseded, lastKeepAliveAckNanos, !watchBroken);
        Optional<String> invalid = invalidReason(e, nanoClock.getAsLong(), settings.leaseTtl());
        List<Member> registeredMembers;
        long rev;
        synchronized (members) {
            registeredMembers = List.copyOf(members.values());
            rev = revision;
        }
        List<Member> live = proofs.live(registeredMembers);
        String error = lastError;
        long registered = registrations;
        view.set(invalid.isEmpty() ? MembershipView.valid(live, rev, registered)
                : new MembershipView(false, live, rev, invalid.get() + (error.isEmpty() ? "" : " (etcd: " + error + ")"), registered));
    }

    private void register() throws Exception {
        long timeout = settings.rpcTimeout().toMillis();
        if (keepAlive != null) keepAlive.close();
        long lease = client.getLeaseClient().grant(settings.leaseTtl().toSeconds()).get(timeout, TimeUnit.MILLISECONDS).getID();
        Member self = settings.self();
        ByteSequence incKey = bytes(MembershipRecord.incarnationKey(settings.clusterId(), self.nodeId()));
        ByteSequence mine = bytes(MembershipRecord.padded(self.incarnation()));
        TxnResponse txn = client.getKVClient().txn()
                .If(new Cmp(incKey, Cmp.Op.GREATER, CmpTarget.value(mine)))
                .Then(Op.get(incKey, GetOption.DEFAULT))
                .Else(Op.put(incKey, mine, PutOption.DEFAULT),
                        Op.put(bytes(MembershipRecord.memberKey(settings.clusterId(), self.nodeId())),
                                bytes(MembershipRecord.value(self)), PutOption.builder().withLeaseId(lease).build()))
                .commit().get(timeout, TimeUnit.MILLISECONDS);
        if (txn.isSucceeded()) {
            staleRefused.increment();
            superseded = true;
            System.getLogger(EtcdMembership.class.getName()).log(System.Logger.Level.WARNING, "etcd holds a higher"
                    + " incarnation of node " + self.nodeId() + " than this process's " + self.incarnation()
                    + ": registration refused, this process stays out of the cluster (a newer process of this node"
                    + " runs, or etcd was unreachable at start after the state directory was wiped: restart to rejoin)");
            client.getLeaseClient().revoke(lease);
            return;
        }
        reRegistrations.increment();
        registrations++;
        leaseId = lease;
        lastKeepAliveAckNanos = nanoClock.getAsLong();
        leaseBroken = false;
        registered = true;
        keepAlive = client.getLeaseClient().keepAlive(lease, new StreamObserver<>() {
            @Override
            public void onNext(LeaseKeepAliveResponse r) {
                if (r.getTTL() > 0) lastKeepAliveAckNanos = nanoClock.getAsLong();
                else leaseBroken = true; // the lease expired in etcd
            }

            @Override
            public void onError(Throwable t) {
                leaseBroken = true;
            }

            @Override
            public void onCompleted() {
                leaseBroken = true;
            }
        });
        watchBroken = true; // a fresh registration re-lists, so the view includes it
    }

    private void relistAndWatch() throws Exception {
        if (watcher != null) watcher.close();
        ByteSequence prefix = bytes(MembershipRecord.membersPrefix(settings.clusterId()));
        GetResponse listed = client.getKVClient().get(prefix, GetOption.builder().isPrefix(true).build())
                .get(settings.rpcTimeout().toMillis(), TimeUnit.MILLISECONDS);
        synchronized (members) {
            members.clear();
            for (KeyValue kv : listed.getKvs()) apply(kv);
            revision = listed.getHeader().getRevision();
        }
        checkSelf();
        watchRepairs.increment();
        watchBroken = false;
        watcher = client.getWatchClient().watch(prefix,
                WatchOption.builder().isPrefix(true).withRevision(listed.getHeader().getRevision() + 1).build(),
                new Watch.Listener() {
                    @Override
                    public void onNext(WatchResponse response) {
                        synchronized (members) {
                            for (WatchEvent ev : response.getEvents()) {
                                switch (ev.getEventType()) {
                                    case PUT -> apply(ev.getKeyValue());
                                    case DELETE -> members.remove(nodeOf(ev.getKeyValue()));
                                    case UNRECOGNIZED -> watchBroken = true;
                                }
                            }
                            revision = Math.max(revision, response.getHeader().getRevision());
                        }
                        checkSelf();
                        control.execute(EtcdMembership.this::publish);
                    }

                    @Override
                    public void onError(Throwable t) {
                        watchBroken = true;
                        control.execute(EtcdMembership.this::publish);
                    }

                    @Override
                    public void onCompleted() {
                        watchBroken = true;
                    }
                });
    }

    /**
     * Drops the members watch as a broken stream would (the view turns invalid until the next
     * tick re-lists and re-watches). Operators never need it; tests use it to drive the repair
     * path, which a real etcd otherwise takes only on rare stream failures.
     */
    void dropWatch() {
        control.execute(() -> {
            if (watcher != null) watcher.close();
            watchBroken = true;
            publish();
        });
    }

    /** List + watch (re)starts so far, the first included. */
    long watchStarts() {
        return (long) watchRepairs.count();
    }

    private void apply(KeyValue kv) {
        MembershipRecord.parse(settings.clusterId(), kv.getKey().toString(StandardCharsets.UTF_8), kv.getValue().getBytes())
                .ifPresent(m -> members.put(m.nodeId(), m));
    }

    private String nodeOf(KeyValue kv) {
        return kv.getKey().toString(StandardCharsets.UTF_8).substring(MembershipRecord.membersPrefix(settings.clusterId()).length());
    }

    /** A record of this node with a higher incarnation means this process is a stale one. */
    private void checkSelf() {
        Member self = settings.self();
        Member seen;
        synchronized (members) {
            seen = members.get(self.nodeId());
        }
        if (seen != null && seen.incarnation() > self.incarnation()) superseded = true;
        if (seen == null && registered && !watchBroken) leaseBroken = true; // our record vanished: lease expired
    }

    private static ByteSequence bytes(String s) {
        return ByteSequence.from(s, StandardCharsets.UTF_8);
    }

    /** How {@link #close()} left the cluster; each is a fact the daemon logs as it is. */
    public enum Leave {
        /** Still a member: {@link #close()} has not run. */
        NOT_LEFT,
        /** The lease was revoked: others dropped this node at once. */
        LEASE_REVOKED,
        /** etcd was not reachable (view invalid) or did not answer within {@link #REVOKE_TIMEOUT}:
         *  the lease expires by itself after its TTL. */
        LEASE_LEFT_TO_EXPIRE,
        /** This process held no lease of its own (never registered, or superseded). */
        NO_LEASE
    }

    /** Longest a revoke may delay a stop when etcd answered keep-alives until now (loopback: ~1 ms). */
    public static final Duration REVOKE_TIMEOUT = Duration.ofMillis(250);

    private volatile Leave leave = Leave.NOT_LEFT;

    /** How this membership was left; {@link Leave#NOT_LEFT} before {@link #close()}. */
    public Leave leave() {
        return leave;
    }

    /**
     * Stops the loop and closes the client; revokes the lease (others drop this node at once)
     * only while the view is valid, i.e. etcd acknowledged a keep-alive within the TTL, and then
     * for at most {@link #REVOKE_TIMEOUT}. With etcd already gone no revoke is attempted: the
     * lease expires by itself, and the stop is not delayed by a call that cannot succeed.
     */
    @Override
    public void close() {
        if (leave != Leave.NOT_LEFT) return;
        boolean reachable = view.get().valid();
        control.shutdownNow();
        try {
            control.awaitTermination(2, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        Leave outcome = Leave.NO_LEASE;
        try {
            if (watcher != null) watcher.close();
            if (keepAlive != null) keepAlive.close();
            if (registered && !superseded) {
                outcome = Leave.LEASE_LEFT_TO_EXPIRE;
                if (reachable) {
                    client.getLeaseClient().revoke(leaseId).get(REVOKE_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
                    outcome = Leave.LEASE_REVOKED;
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (ExecutionException | TimeoutException | EtcdException | StatusRuntimeException e) {
            // etcd went away since the last keep-alive: the lease expires by itself after its TTL
        } catch (RuntimeException e) {
            UnexpectedErrors.record(UnexpectedErrors.Layer.CLUSTER, "EtcdMembership.close", "a lease left to expire", e);
        } finally {
            leave = outcome;
            client.close();
        }
    }
}
