package io.orbitkv.state.protocol;

import java.util.AbstractList;
import java.util.List;
import java.util.Objects;
import java.util.RandomAccess;

/**
 * The page entries of one QUERY_RESULT span, packed: one state code per page and, for RESIDENT
 * pages, the lease's arena index, offset and length in primitive arrays. A flyweight: it is a
 * {@code List<Reply.PageResult>} whose {@link #get} builds the element on demand, while the hot
 * paths (the encoder, the decoder, the FINAL-state check, a client building a RESTORE) read
 * {@link #state}, {@link #arenaIndex}, {@link #offsetBytes} and {@link #lengthBytes} without
 * any object per page.
 *
 * <p>Immutable and thread-safe once built; a {@link Builder} is confined to the thread filling it.
 *
 * <p>Invariants: at least one entry; a RESIDENT entry's lease obeys {@link Reply.Lease}'s rules
 * (arena index and offset {@code >= 0}, length {@code >= 1}); the lease arrays exist only when
 * some entry is RESIDENT, so a 65,536-page miss costs 64 KiB of state bytes and nothing else.
 *
 * <p>Design note: a record per page ({@link Reply.Resident} holding a {@link Reply.Lease}, about
 * 56 bytes and two allocations) made decoding and encoding a 1,024-page hit most of the client's
 * and a large share of the Manager's time per QUERY; packed arrays are 17 bytes a page (the wire
 * entry's size) and copy in loops the JIT keeps in registers. Entries are copied out of the frame
 * rather than read in place, because the receive buffer is reused for the next frame while the
 * caller still holds the result.
 */
public final class PageEntries extends AbstractList<Reply.PageResult> implements RandomAccess {

    /** States by wire code (codes are 0..4, dense). */
    private static final PageState[] BY_CODE = byCode();

    private final byte[] states;
    private final int[] arenas;
    private final long[] offsets;
    private final int[] lengths;

    private PageEntries(byte[] states, int[] arenas, long[] offsets, int[] lengths) {
        this.states = states;
        this.arenas = arenas;
        this.offsets = offsets;
        this.lengths = lengths;
    }

    /** A builder of exactly {@code count} entries ({@code >= 1}). */
    public static Builder builder(int count) {
        return new Builder(count);
    }

    /**
     * {@code pages} packed; {@code pages} itself when it is already a {@code PageEntries}.
     *
     * @throws NullPointerException     a null list or element
     * @throws IllegalArgumentException an empty list
     */
    public static PageEntries copyOf(List<? extends Reply.PageResult> pages) {
        Objects.requireNonNull(pages, "pages");
        if (pages instanceof PageEntries packed) return packed;
        Builder b = builder(pages.size());
        for (Reply.PageResult p : pages) {
            switch (Objects.requireNonNull(p, "page")) {
                case Reply.Resident(Reply.Lease lease) -> b.resident(lease.arenaIndex(), lease.offsetBytes(),
                        lease.lengthBytes());
                case Reply.Unleased u -> b.unleased(u.state());
            }
        }
        return b.build();
    }

    @Override
    public int size() {
        return states.length;
    }

    /** The state of entry {@code i}. */
    public PageState state(int i) {
        return BY_CODE[states[i]];
    }

    /** True when entry {@code i} is RESIDENT (it carries a lease). */
    public boolean isResident(int i) {
        return states[i] == PageState.RESIDENT.code();
    }

    /** The arena index of RESIDENT entry {@code i}'s lease. */
    public int arenaIndex(int i) {
        requireResident(i);
        return arenas[i];
    }

    /** The offset in its arena of RESIDENT entry {@code i}'s page image. */
    public long offsetBytes(int i) {
        requireResident(i);
        return offsets[i];
    }

    /** The length of RESIDENT entry {@code i}'s page image. */
    public int lengthBytes(int i) {
        requireResident(i);
        return lengths[i];
    }

    /** Entry {@code i} as a value: a shared {@link Reply.Unleased} constant, or a new {@link Reply.Resident}. */
    @Override
    public Reply.PageResult get(int i) {
        return switch (state(i)) {
            case MISS -> Reply.Unleased.MISS;
            case CANDIDATE -> Reply.Unleased.CANDIDATE;
            case RESERVED -> Reply.Unleased.RESERVED;
            case READY -> Reply.Unleased.READY;
            case RESIDENT -> new Reply.Resident(new Reply.Lease(arenas[i], offsets[i], lengths[i]));
        };
    }

    private void requireResident(int i) {
        if (!isResident(i)) throw new IllegalStateException("entry " + i + " is " + state(i) + ", not RESIDENT");
    }

    private static PageState[] byCode() {
        PageState[] out = new PageState[PageState.values().length];
        for (PageState s : PageState.values()) out[s.code()] = s;
        return out;
    }

    /** Fills the entries of one span in page order; {@link #build} once all {@code count} are added. */
    public static final class Builder {
        private final byte[] states;
        private int[] arenas;
        private long[] offsets;
        private int[] lengths;
        private int size;

        private Builder(int count) {
            if (count < 1) throw new IllegalArgumentException("a span has at least one page: " + count);
            this.states = new byte[count];
        }

        /** The next entry, in a state that carries no lease (any but RESIDENT). */
        public Builder unleased(PageState state) {
            Objects.requireNonNull(state, "state");
            if (state == PageState.RESIDENT) throw new IllegalArgumentException("a RESIDENT page carries a lease");
            requireRoom();
            states[size++] = (byte) state.code();
            return this;
        }

        /** The next entry, RESIDENT, with its lease (the rules of {@link Reply.Lease}). */
        public Builder resident(int arenaIndex, long offsetBytes, int lengthBytes) {
            Check.nonNegative("arena_index", arenaIndex);
            Check.nonNegative("offset_bytes", offsetBytes);
            Check.positive("length_bytes", lengthBytes);
            requireRoom();
            if (arenas == null) {
                arenas = new int[states.length];
                offsets = new long[states.length];
                lengths = new int[states.length];
            }
            arenas[size] = arenaIndex;
            offsets[size] = offsetBytes;
            lengths[size] = lengthBytes;
            states[size++] = (byte) PageState.RESIDENT.code();
            return this;
        }

        /** The packed entries; the builder must not be used afterwards. */
        public PageEntries build() {
            if (size != states.length) {
                throw new IllegalStateException("built after " + size + " of " + states.length + " entries");
            }
            return new PageEntries(states, arenas, offsets, lengths);
        }

        private void requireRoom() {
            if (size == states.length) throw new IllegalStateException("all " + states.length + " entries are added");
        }
    }
}
