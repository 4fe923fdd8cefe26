package io.orbitkv.state;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * A half-open range of page indices {@code [startPage, endPage)}; page {@code i} holds tokens
 * {@code [i*P, (i+1)*P)}.
 *
 * <p>Value; immutable and thread-safe. Invariant: {@code 0 <= startPage < endPage}, so an empty
 * range cannot be built. Page indices are {@code long}: a 2^31-token sequence at {@code P = 1}
 * still fits.
 *
 * @param startPage first page in the range, {@code >= 0}
 * @param endPage   one past the last page, {@code > startPage}
 */
public record PageRange(long startPage, long endPage) {

    public PageRange {
        if (startPage < 0 || endPage <= startPage) {
            throw new IllegalArgumentException("page range must satisfy 0 <= start < end: [" + startPage + ", " + endPage + ")");
        }
    }

    /** Number of pages in the range. */
    public long pages() {
        return endPage - startPage;
    }

    /**
     * The normal form of a set of ranges: sorted by start, with overlapping and adjacent ranges
     * merged, so two lists describe the same pages iff they are equal.
     */
    public static List<PageRange> normalize(List<PageRange> ranges) {
        List<PageRange> sorted = new ArrayList<>(ranges);
        sorted.sort(Comparator.comparingLong(PageRange::startPage));
        List<PageRange> out = new ArrayList<>(sorted.size());
        long start = -1;
        long end = -1;
        for (PageRange r : sorted) {
            if (start >= 0 && r.startPage() <= end) {
                end = Math.max(end, r.endPage());
            } else {
                if (start >= 0) out.add(new PageRange(start, end));
                start = r.startPage();
                end = r.endPage();
            }
        }
        if (start >= 0) out.add(new PageRange(start, end));
        return List.copyOf(out);
    }

    @Override
    public String toString() {
        return "[" + startPage + ", " + endPage + ")";
    }
}
