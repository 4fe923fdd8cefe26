package io.orbitkv.core.catalog;

import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.state.StateKey;
import java.util.ArrayList;
import java.util.Arrays;
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
 * <p>The stream has one ADDED and one REMOVED per image, and an image is identified by
 * (namespace, key): the same key bytes held in two namespaces are two images whose events
 * interleave. The catalog names pages by key, so the mirror keeps the generations of a key's
 * images per medium and {@link #apply} says whether the key's presence on the medium changed
 * (its first image there added, its last removed): only those events go to the shard owners, so
 * removing one namespace's image never drops the evidence of another's.
 *
 * <p>Confined to the publisher's thread (not thread-safe). Bounded by what the tiers hold: one
 * entry per resident key, removed when the key leaves both media. Invariant: after applying the
 * stream's events 1..n in order, the mirror equals the tiers' residency at sequence n. Applying an
 * event twice changes nothing (a generation is added or removed once), so a rebuild from the
 * tiers' key lists followed by the events during the copy converges; a key listed by the copy
 * holds a generation-0 placeholder, which the first event of that key and medium takes over.
 */
final class ResidencyMirror {

    private static final long[] NONE = new long[0];
    /** The generation of an image known from a rebuild's key list only. */
    private static final long UNKNOWN_GENERATION = 0;

    /** One key: per medium, the sequence that made it present (0 = absent) and its images' generations. */
    private static final class Entry {
        final long[] sequence = new long[2];
        final long[][] generations = {NONE, NONE};
        int lengthBytes;

        boolean empty() {
            return generations[0].length == 0 && generations[1].length == 0;
        }
    }

    private final Map<StateKey, Entry> entries = new HashMap<>();

    /**
     * Applies one event (events must arrive in sequence order). Returns true when it changed whether
     * the key is present on the event's medium (its first image there added, or its last removed):
     * the events the catalog forwards.
     */
    public boolean apply(ResidencyEvent e) {
        int medium = e.medium().ordinal();
        switch (e.kind()) {
            case ADDED -> {
                Entry entry = entries.computeIfAbsent(e.key(), k -> new Entry());
                if (e.lengthBytes() > 0) entry.lengthBytes = e.lengthBytes();
                long[] gens = entry.generations[medium];
                if (e.generation() != UNKNOWN_GENERATION) {
                    if (indexOf(gens, e.generation()) >= 0) return false;
                    int placeholder = indexOf(gens, UNKNOWN_GENERATION);
                    if (placeholder >= 0) {
                        gens[placeholder] = e.generation();
                        return false;
                    }
                }
                gens = Arrays.copyOf(gens, gens.length + 1);
                gens[gens.length - 1] = e.generation();
                entry.generations[medium] = gens;
                if (gens.length > 1) return false;
                entry.sequence[medium] = e.sequence();
                return true;
            }
            case REMOVED -> {
                Entry entry = entries.get(e.key());
                if (entry == null) return false;
                long[] gens = entry.generations[medium];
                int at = indexOf(gens, e.generation());
                if (at < 0) at = indexOf(gens, UNKNOWN_GENERATION);
                if (at < 0) return false;
                long[] left = new long[gens.length - 1];
                System.arraycopy(gens, 0, left, 0, at);
                System.arraycopy(gens, at + 1, left, at, left.length - at);
                entry.generations[medium] = left.length == 0 ? NONE : left;
                if (left.length > 0) return false;
                entry.sequence[medium] = 0;
                if (entry.empty()) entries.remove(e.key());
                return true;
            }
        }
        return false;
    }

    private static int indexOf(long[] values, long value) {
        for (int i = 0; i < values.length; i++) {
            if (values[i] == value) return i;
        }
        return -1;
    }

    /** Resident images of the keys {@code include} accepts, as ADDED events with their sequences. */
    public List<ResidencyEvent> snapshot(Predicate<StateKey> include) {
        List<ResidencyEvent> out = new ArrayList<>();
        for (var e : entries.entrySet()) {
            if (!include.test(e.getKey())) continue;
            for (ResidencyEvent.Medium m : ResidencyEvent.Medium.values()) {
                long seq = e.getValue().sequence[m.ordinal()];
                if (seq > 0) out.add(new ResidencyEvent(seq, e.getKey(), m, ResidencyEvent.Kind.ADDED, 0, e.getValue().lengthBytes));
            }
        }
        return out;
    }

    /** Visits every resident key with its {DRAM sequence, SSD sequence, length} (read only). */
    void forEach(java.util.function.BiConsumer<StateKey, long[]> visit) {
        entries.forEach((key, e) -> visit.accept(key, new long[] {e.sequence[0], e.sequence[1], e.lengthBytes}));
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
        Entry entry = entries.get(key);
        return entry != null && entry.sequence[medium.ordinal()] > 0;
    }
}
