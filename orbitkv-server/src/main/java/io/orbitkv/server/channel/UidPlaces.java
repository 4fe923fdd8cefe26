package io.orbitkv.server.channel;

import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.function.Predicate;

/**
 * A bounded set of places held by connections, counted per peer uid ({@code SO_PEERCRED}; any
 * value with {@code equals}, an {@code Integer} uid or the user's principal): at
 * most {@code total} places, at most {@code perUid} of them held by one uid. A newcomer that finds
 * its uid's share or the whole set taken displaces the oldest holder that {@code displaceable}
 * says may go (one that has sent nothing for a while): of its own uid when its share is taken,
 * else of the uid holding the most places. Only when no such holder exists is it refused.
 *
 * <p>Thread model: every method takes the set's monitor and never calls out except to
 * {@code displaceable} (a field read); the caller closes a displaced holder after the call.
 * Invariants: {@code held() <= total}; each uid holds {@code <= perUid}; a holder is counted once
 * from {@link #admit} until {@link #leave} or its displacement.
 *
 * <p>Design note: a share per uid alone keeps places for other uids (the Manager's engines may
 * run as several users), but not for a newcomer of the flooding uid itself, which is the common
 * case of one user running both; displacing the oldest silent holder serves that case too, and
 * costs a hostile client nothing it had a right to: it never sent a request.
 *
 * @param <T> the holder (a connection); compared by identity
 */
final class UidPlaces<T> {

    /** Why a newcomer got no place: every place is held, or (with places left) its uid's share is. */
    enum Refusal { FULL, UID_FULL }

    /** The outcome of {@link #admit}. */
    sealed interface Admission<T> {
        /** Placed; {@code displaced}, if present, lost its place and must be closed by the caller. */
        record Placed<T>(Optional<T> displaced) implements Admission<T> {
        }

        /** No place, and no holder could be displaced. */
        record Refused<T>(Refusal reason) implements Admission<T> {
        }
    }

    private final int total;
    private final int perUid;
    private final Predicate<T> displaceable;
    /** Guarded by {@code this}; insertion order is age order. */
    private final Map<T, Object> uidOf = new LinkedHashMap<>();
    /** Guarded by {@code this}; places held per uid, entries removed at 0. */
    private final Map<Object, Integer> heldBy = new HashMap<>();

    UidPlaces(int total, int perUid, Predicate<T> displaceable) {
        if (total < 1 || perUid < 1 || perUid > total) {
            throw new IllegalArgumentException("need 1 <= perUid (" + perUid + ") <= total (" + total + ")");
        }
        this.total = total;
        this.perUid = perUid;
        this.displaceable = displaceable;
    }

    /** Places {@code holder} of {@code uid}, displacing an older silent holder if it must. */
    synchronized Admission<T> admit(T holder, Object uid) {
        T displaced = null;
        boolean full = uidOf.size() >= total;
        if (heldBy.getOrDefault(uid, 0) >= perUid) {
            displaced = oldestDisplaceable(uid); // never another uid's: the newcomer's uid keeps its share
            if (displaced == null) return new Admission.Refused<>(full ? Refusal.FULL : Refusal.UID_FULL);
        } else if (full) {
            displaced = oldestDisplaceableOfLargestHolder();
            if (displaced == null) return new Admission.Refused<>(Refusal.FULL);
        }
        if (displaced != null) leave(displaced);
        uidOf.put(holder, uid);
        heldBy.merge(uid, 1, Integer::sum);
        return new Admission.Placed<>(Optional.ofNullable(displaced));
    }

    /** Frees {@code holder}'s place; false if it held none (left already, or was displaced). */
    synchronized boolean leave(T holder) {
        Object uid = uidOf.remove(holder);
        if (uid == null) return false;
        heldBy.computeIfPresent(uid, (u, n) -> n == 1 ? null : n - 1);
        return true;
    }

    /** Places held now. */
    synchronized int held() {
        return uidOf.size();
    }

    /** Places {@code uid} holds now. */
    synchronized int heldBy(Object uid) {
        return heldBy.getOrDefault(uid, 0);
    }

    private T oldestDisplaceable(Object uid) {
        for (Map.Entry<T, Object> e : uidOf.entrySet()) {
            if (e.getValue().equals(uid) && displaceable.test(e.getKey())) return e.getKey();
        }
        return null;
    }

    private T oldestDisplaceableOfLargestHolder() {
        T best = null;
        int bestHeld = 0;
        for (Map.Entry<T, Object> e : uidOf.entrySet()) {
            int held = heldBy.get(e.getValue());
            if (held > bestHeld && displaceable.test(e.getKey())) {
                best = e.getKey();
                bestHeld = held;
            }
        }
        return best;
    }
}
