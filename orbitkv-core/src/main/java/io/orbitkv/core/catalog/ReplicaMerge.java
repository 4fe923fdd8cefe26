package io.orbitkv.core.catalog;

import io.orbitkv.state.StateKey;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeoutException;

/**
 * One round of a replicated lookup: every key's R owners under one view are asked in parallel (one
 * call per owner for all its keys) and their answers merged per key. Merge rule: any owner's
 * {@link KeyLocation.Present} makes the key present (holders of every owner that answered so far,
 * each once); else an {@link KeyLocation.Absent} (that owner had complete coverage under this very
 * placement); else {@link KeyLocation.Unknown}, with {@link KeyLocation.UnknownReason#STALE_PLACEMENT}
 * preferred (it is worth asking again) over the first other reason. A failed or late call is an
 * Unknown answer of that owner (TIMED_OUT, LOOKUP_LIMIT or UNREACHABLE).
 *
 * <p>Thread model: the answers arrive on transport threads; the merge state is guarded by itself.
 * Invariant: the future completes once every key is settled, that is present (one owner's
 * evidence is enough: a live owner holding it answers as fast as it can, whatever the others do)
 * or answered by all its owners; every call ends by its deadline, so the round does too.
 */
final class ReplicaMerge {

    /** A lookup call not made: the requester's in-flight bound was reached. */
    static final class OverLimit extends RuntimeException {
        private static final long serialVersionUID = 1L;

        OverLimit() {
            super("catalog lookup calls in flight at their bound", null, false, false);
        }
    }

    /** How one owner is asked (the requester's bounded, deadline-guarded call). */
    @FunctionalInterface
    interface Call {
        CompletableFuture<List<KeyLocation>> lookup(Member owner, List<StateKey> keys, MembershipView view, long timeoutMillis);
    }

    private final Map<StateKey, KeyLocation> best = new HashMap<>();
    private final Map<StateKey, Integer> pending = new HashMap<>();
    private final CompletableFuture<Map<StateKey, KeyLocation>> done = new CompletableFuture<>();
    private int unsettled;

    private ReplicaMerge() {
    }

    /** Asks the owners of {@code keys} under {@code view}; completes with one merged answer per key. */
    static CompletableFuture<Map<StateKey, KeyLocation>> ask(List<StateKey> keys, MembershipView view, int replicas,
                                                             long deadlineNanos, Call call) {
        ReplicaMerge m = new ReplicaMerge();
        Map<Member, List<StateKey>> byOwner = new LinkedHashMap<>();
        Set<StateKey> distinct = new LinkedHashSet<>(keys);
        for (StateKey k : distinct) {
            List<Member> owners = Rendezvous.owners(k, view.live(), replicas);
            m.pending.put(k, owners.size());
            for (Member o : owners) byOwner.computeIfAbsent(o, x -> new ArrayList<>()).add(k);
        }
        m.unsettled = distinct.size();
        long timeoutMillis = Math.max(1, (deadlineNanos - System.nanoTime()) / 1_000_000L);
        for (var e : byOwner.entrySet()) {
            List<StateKey> batch = e.getValue();
            CompletableFuture<List<KeyLocation>> f;
            try {
                f = call.lookup(e.getKey(), batch, view, timeoutMillis);
            } catch (RuntimeException ex) {
                f = CompletableFuture.failedFuture(ex);
            }
            f.whenComplete((answers, failure) -> m.answered(batch, answers, failure));
        }
        return m.done;
    }

    private synchronized void answered(List<StateKey> batch, List<KeyLocation> answers, Throwable failure) {
        if (done.isDone()) return;
        boolean failed = failure != null || answers == null || answers.size() != batch.size();
        for (int i = 0; i < batch.size(); i++) {
            StateKey k = batch.get(i);
            KeyLocation before = best.get(k);
            boolean wasSettled = before instanceof KeyLocation.Present || pending.get(k) == 0;
            KeyLocation merged = merge(before, failed ? new KeyLocation.Unknown(reasonOf(failure)) : answers.get(i));
            best.put(k, merged);
            pending.merge(k, -1, Integer::sum);
            boolean settled = merged instanceof KeyLocation.Present || pending.get(k) == 0;
            if (settled && !wasSettled) unsettled--;
        }
        if (unsettled == 0) done.complete(new HashMap<>(best));
    }

    /** The merge rule (see the class comment). */
    static KeyLocation merge(KeyLocation a, KeyLocation b) {
        if (a == null) return b;
        if (a instanceof KeyLocation.Present pa && b instanceof KeyLocation.Present pb) {
            List<Holder> holders = new ArrayList<>(pa.holders());
            for (Holder h : pb.holders()) if (!holders.contains(h)) holders.add(h);
            return new KeyLocation.Present(holders);
        }
        if (a instanceof KeyLocation.Present) return a;
        if (b instanceof KeyLocation.Present) return b;
        if (a instanceof KeyLocation.Absent) return a;
        if (b instanceof KeyLocation.Absent) return b;
        if (b instanceof KeyLocation.Unknown ub && ub.reason() == KeyLocation.UnknownReason.STALE_PLACEMENT) return b;
        return a;
    }

    private static KeyLocation.UnknownReason reasonOf(Throwable failure) {
        Throwable t = failure;
        while (t != null) {
            if (t instanceof TimeoutException) return KeyLocation.UnknownReason.TIMED_OUT;
            if (t instanceof OverLimit) return KeyLocation.UnknownReason.LOOKUP_LIMIT;
            t = t.getCause();
        }
        return KeyLocation.UnknownReason.UNREACHABLE;
    }
}
