package io.orbitkv.core.catalog;

import io.orbitkv.state.StateKey;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
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

    /** One owner's share of the round: its keys, and where each stands in the round's key list. */
    private static final class Batch {
        final List<StateKey> keys = new ArrayList<>();
        int[] at = new int[16];

        void add(StateKey key, int index) {
            if (keys.size() == at.length) at = Arrays.copyOf(at, at.length * 2);
            at[keys.size()] = index;
            keys.add(key);
        }
    }

    /** Guarded by {@code this}: the merged answer so far and the owners yet to answer, per key index. */
    private final KeyLocation[] best;
    private final int[] pending;
    private final CompletableFuture<List<KeyLocation>> done = new CompletableFuture<>();
    private int unsettled;

    private ReplicaMerge(int keys) {
        best = new KeyLocation[keys];
        pending = new int[keys];
        unsettled = keys;
    }

    /**
     * Asks the owners of {@code keys} (distinct) under {@code view}; completes with one merged
     * answer per key, in the order of {@code keys}.
     */
    static CompletableFuture<List<KeyLocation>> ask(List<StateKey> keys, MembershipView view, int replicas,
                                                    long deadlineNanos, Call call) {
        if (keys.isEmpty()) return CompletableFuture.completedFuture(List.of());
        ReplicaMerge m = new ReplicaMerge(keys.size());
        // owners are elements of view.live(): identity is enough, and cheaper than Member.hashCode
        Map<Member, Batch> byOwner = new IdentityHashMap<>();
        for (int i = 0; i < keys.size(); i++) {
            StateKey k = keys.get(i);
            List<Member> owners = Rendezvous.owners(k, view.live(), replicas);
            m.pending[i] = owners.size();
            for (Member o : owners) byOwner.computeIfAbsent(o, x -> new Batch()).add(k, i);
        }
        long timeoutMillis = Math.max(1, (deadlineNanos - System.nanoTime()) / 1_000_000L);
        for (var e : byOwner.entrySet()) {
            Batch batch = e.getValue();
            CompletableFuture<List<KeyLocation>> f;
            try {
                f = call.lookup(e.getKey(), batch.keys, view, timeoutMillis);
            } catch (RuntimeException ex) {
                f = CompletableFuture.failedFuture(ex);
            }
            f.whenComplete((answers, failure) -> m.answered(batch, answers, failure));
        }
        return m.done;
    }

    private synchronized void answered(Batch batch, List<KeyLocation> answers, Throwable failure) {
        if (done.isDone()) return;
        int n = batch.keys.size();
        boolean failed = failure != null || answers == null || answers.size() != n;
        KeyLocation unknown = failed ? new KeyLocation.Unknown(reasonOf(failure)) : null;
        for (int i = 0; i < n; i++) {
            int k = batch.at[i];
            KeyLocation before = best[k];
            boolean wasSettled = before instanceof KeyLocation.Present || pending[k] == 0;
            KeyLocation merged = merge(before, failed ? unknown : answers.get(i));
            best[k] = merged;
            pending[k]--;
            boolean settled = merged instanceof KeyLocation.Present || pending[k] == 0;
            if (settled && !wasSettled) unsettled--;
        }
        if (unsettled == 0) done.complete(Arrays.asList(best)); // no answer writes it once done
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
