package io.orbitkv.state;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * What one group has available: page ranges (full and sliding-window groups) or checkpoint
 * token positions (recurrent groups).
 *
 * <p>Immutable and thread-safe. Both forms are kept in normal form in primitive arrays (ranges
 * sorted and merged; checkpoints sorted and distinct), so every query is one binary search:
 * {@code O(log R)} for {@code R} ranges, however many pages a range spans.
 */
public sealed interface GroupCoverage {

    /** Available pages, from any ranges (overlaps and adjacency are merged). */
    static Pages pages(List<PageRange> ranges) {
        List<PageRange> normal = PageRange.normalize(ranges);
        long[] starts = new long[normal.size()];
        long[] ends = new long[normal.size()];
        for (int i = 0; i < starts.length; i++) {
            starts[i] = normal.get(i).startPage();
            ends[i] = normal.get(i).endPage();
        }
        return new Pages(starts, ends);
    }

    /** Available checkpoints at these token positions (each {@code > 0}; duplicates collapse). */
    static Checkpoints checkpoints(long... tokenPositions) {
        long[] sorted = Arrays.stream(tokenPositions).sorted().distinct().toArray();
        for (long t : sorted) {
            if (t <= 0) throw new IllegalArgumentException("checkpoint positions must be > 0: " + t);
        }
        return new Checkpoints(sorted);
    }

    /** Available page ranges in normal form. */
    final class Pages implements GroupCoverage {
        private final long[] starts;
        private final long[] ends;

        private Pages(long[] starts, long[] ends) {
            this.starts = starts;
            this.ends = ends;
        }

        /** The ranges, in normal form. */
        public List<PageRange> ranges() {
            List<PageRange> out = new ArrayList<>(starts.length);
            for (int i = 0; i < starts.length; i++) out.add(new PageRange(starts[i], ends[i]));
            return List.copyOf(out);
        }

        /** True if page {@code page} is available. */
        public boolean contains(long page) {
            return firstMissing(page, page + 1) == page + 1;
        }

        /**
         * The lowest page in {@code [from, to)} that is not available, or {@code to} if all are.
         * Ranges are merged, so the run holding {@code from} is the only one to look at.
         */
        public long firstMissing(long from, long to) {
            if (from >= to) return to;
            int i = Arrays.binarySearch(starts, from);
            int run = i >= 0 ? i : -i - 2; // last range starting at or before `from`
            if (run < 0 || ends[run] <= from) return from;
            return Math.min(ends[run], to);
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Pages p && Arrays.equals(starts, p.starts) && Arrays.equals(ends, p.ends);
        }

        @Override
        public int hashCode() {
            return 31 * Arrays.hashCode(starts) + Arrays.hashCode(ends);
        }

        @Override
        public String toString() {
            return "Pages" + ranges();
        }
    }

    /** Available checkpoint token positions, sorted and distinct. */
    final class Checkpoints implements GroupCoverage {
        private final long[] positions;

        private Checkpoints(long[] positions) {
            this.positions = positions;
        }

        /** The positions, ascending. */
        public long[] positions() {
            return positions.clone();
        }

        /** True if a checkpoint exists exactly at token {@code tokens}. */
        public boolean contains(long tokens) {
            return Arrays.binarySearch(positions, tokens) >= 0;
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Checkpoints c && Arrays.equals(positions, c.positions);
        }

        @Override
        public int hashCode() {
            return Arrays.hashCode(positions);
        }

        @Override
        public String toString() {
            return "Checkpoints" + Arrays.toString(positions);
        }
    }
}
