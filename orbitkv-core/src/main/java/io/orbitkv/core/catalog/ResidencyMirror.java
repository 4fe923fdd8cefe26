package io.orbitkv.core.catalog;

import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.state.StateKey;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;

/**
 * This node's own residency as the catalog publisher last read it from the
 * {@link io.orbitkv.core.storage.residency.ResidencyStream}: which keys are resident on which medium, as of
 * which sequence, and the page's length when an event carried it. The source of every snapshot
 * sent to shard owners.
 *
 * <p>Confined to the publisher's thread (not thread-safe). Bounded by what the tiers hold: one
 * entry per resident key, removed when the key leaves both media. Invariant: after applying the
 * stream's events 1..n in order, the mirror equals the tiers' residency at sequence n.
 */
final class ResidencyMirror {

    /** key → {DRAM sequence, SSD sequence, length in bytes}; sequence 0 = not resident on that
     *  medium, length 0 = unknown. */
    private final Map<StateKey, long[]> entries = new HashMap<>();

    /** Applies one event (events must arrive in sequence order). */
    public void apply(ResidencyEvent e) {
        int medium = e.medium().ordinal();
        switch (e.kind()) {
            case ADDED -> {
                long[] seqs = entries.computeIfAbsent(e.key(), k -> new long[3]);
                seqs[medium] = e.sequence();
                if (e.lengthBytes() > 0) seqs[2] = e.lengthBytes();
            }
            case REMOVED -> {
                long[] seqs = entries.get(e.key());
                if (seqs == null) return;
                seqs[medium] = 0;
                if (seqs[0] == 0 && seqs[1] == 0) entries.remove(e.key());
            }
        }
    }

    /** Resident images of the keys {@code include} accepts, as ADDED events with their sequences. */
    public List<ResidencyEvent> snapshot(Predicate<StateKey> include) {
        List<ResidencyEvent> out = new ArrayList<>();
        for (var e : entries.entrySet()) {
            if (!include.test(e.getKey())) continue;
            for (ResidencyEvent.Medium m : ResidencyEvent.Medium.values()) {
                long seq = e.getValue()[m.ordinal()];
                if (seq > 0) out.add(new ResidencyEvent(seq, e.getKey(), m, ResidencyEvent.Kind.ADDED, 0, (int) e.getValue()[2]));
            }
        }
        return out;
    }

    /** Visits every resident key with its {DRAM sequence, SSD sequence, length} (read only). */
    void forEach(java.util.function.BiConsumer<StateKey, long[]> visit) {
        entries.forEach(visit);
    }

    /** Replaces this mirror's content with {@code other}'s (after a stream gap). */
    public void replaceWith(ResidencyMirror other) {
        entries.clear();
        entries.putAll(other.entries);
    }

    /** Keys resident on at least one medium. */
    public int size() {
        return entries.size();
    }

    /** Whether {@code key} is resident on {@code medium}. */
    public boolean holds(StateKey key, ResidencyEvent.Medium medium) {
        long[] seqs = entries.get(key);
        return seqs != null && seqs[medium.ordinal()] > 0;
    }
}
