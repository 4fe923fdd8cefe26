package io.orbitkv.server.membership;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.core.catalog.Member;
import io.orbitkv.core.log.UnexpectedErrors;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.function.LongSupplier;

/**
 * Which registered members proved themselves to this node ({@link MemberVerifier}: in a Manager,
 * the mutual cluster-credential proof), for {@link EtcdMembership}'s view.
 *
 * <p>Owns one proof state per node id (of that node's current record). Thread model: confined to
 * the membership's control thread: {@link #live} runs there, and a proof that completes later
 * comes back through {@code control}, then {@code onResult} (the view is published again).
 *
 * <p>Invariants: a member other than this node is live only once its current record proved
 * itself; a new record of a node (restart: new incarnation) is proven afresh; at most one proof
 * per node is in flight; a failed proof is tried again after {@link #RETRY_INITIAL}, doubling to
 * {@link #RETRY_MAX}; states of nodes no longer registered are dropped, so the table is bounded by
 * the registered members. A verifier answers every failure as false: one that throws or fails its
 * future is a bug, counted ({@link UnexpectedErrors}, layer {@code cluster}) and taken as a failed proof.
 */
final class MemberProofs {

    /** First wait after a failed proof; it doubles up to {@link #RETRY_MAX}. */
    static final Duration RETRY_INITIAL = Duration.ofMillis(500);
    static final Duration RETRY_MAX = Duration.ofSeconds(10);
    private static final String FAILED_PROOF = "a failed proof (the member is not live; retried with backoff)";

    /** Whether one member record proved itself. */
    private static final class Proof {
        final Member member;
        boolean pending;
        boolean proven;
        int failures;
        long retryAtNanos;

        Proof(Member member) {
            this.member = member;
        }
    }

    private final String selfNodeId;
    private final MemberVerifier verifier;
    private final Executor control;
    private final Runnable onResult;
    private final LongSupplier nanoClock;
    private final Counter failed;
    private final Map<String, Proof> proofs = new HashMap<>();
    private volatile int unproven;

    MemberProofs(String selfNodeId, MemberVerifier verifier, Executor control, Runnable onResult, LongSupplier nanoClock,
                 MeterRegistry registry) {
        this.selfNodeId = Objects.requireNonNull(selfNodeId, "selfNodeId");
        this.verifier = Objects.requireNonNull(verifier, "verifier");
        this.control = Objects.requireNonNull(control, "control");
        this.onResult = Objects.requireNonNull(onResult, "onResult");
        this.nanoClock = Objects.requireNonNull(nanoClock, "nanoClock");
        this.failed = Counter.builder("orbitkv_membership_proofs_failed").description("members that failed to prove the cluster credential (each attempt)").register(registry);
        Gauge.builder("orbitkv_membership_unproven", this, p -> p.unproven).description("members registered in etcd but not (yet) proven, so not live").register(registry);
    }

    /**
     * This node's record and every other record that proved itself; starts the proofs that are
     * due (new records, failed ones whose retry time came).
     */
    List<Member> live(List<Member> registeredMembers) {
        long now = nanoClock.getAsLong();
        Set<String> ids = new HashSet<>();
        List<Member> live = new ArrayList<>();
        for (Member m : registeredMembers) {
            ids.add(m.nodeId());
            if (m.nodeId().equals(selfNodeId)) {
                live.add(m);
                continue;
            }
            Proof p = proofs.get(m.nodeId());
            if (p == null || !p.member.equals(m)) {
                p = new Proof(m);
                proofs.put(m.nodeId(), p);
            }
            if (!p.proven && !p.pending && (p.failures == 0 || now - p.retryAtNanos >= 0)) start(p);
            if (p.proven) live.add(m);
        }
        proofs.keySet().retainAll(ids);
        unproven = registeredMembers.size() - live.size();
        return live;
    }

    private void start(Proof p) {
        p.pending = true;
        CompletableFuture<Boolean> proof;
        try {
            proof = verifier.verify(p.member);
        } catch (RuntimeException e) {
            UnexpectedErrors.record(UnexpectedErrors.Layer.CLUSTER, "MemberProofs.start", FAILED_PROOF, e);
            proof = CompletableFuture.completedFuture(false);
        }
        if (proof.isDone() && !proof.isCompletedExceptionally()) {
            onProof(p, Boolean.TRUE.equals(proof.getNow(false)));
            return;
        }
        proof.whenComplete((ok, error) -> {
            if (error != null) UnexpectedErrors.record(UnexpectedErrors.Layer.CLUSTER, "MemberProofs.start", FAILED_PROOF, error);
            try {
                control.execute(() -> {
                    onProof(p, error == null && Boolean.TRUE.equals(ok));
                    onResult.run();
                });
            } catch (RejectedExecutionException closing) {
                // the membership is closing: nothing left to publish
            }
        });
    }

    private void onProof(Proof p, boolean ok) {
        p.pending = false;
        if (ok) {
            p.proven = true;
            p.failures = 0;
            return;
        }
        p.failures++;
        failed.increment();
        long wait = Math.min(RETRY_MAX.toNanos(), RETRY_INITIAL.toNanos() << Math.min(p.failures - 1, 20));
        p.retryAtNanos = nanoClock.getAsLong() + wait;
    }
}
