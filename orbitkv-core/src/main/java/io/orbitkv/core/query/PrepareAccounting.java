package io.orbitkv.core.query;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Consumer;

/**
 * What preparation bought, per namespace (the DRAM tier's namespace id): pages prepared (staged
 * and held) by the route they came from, pages consumed by a QUERY, released unused (cancel,
 * disconnect, a failed read), expired, byte-seconds held, and prepares trimmed or refused.
 *
 * <p>Thread-safe: rows are created once per namespace and hold adders. Bounded: at most
 * {@link #MAX_ROWS} namespaces get their own row; the rest are counted in the row of namespace
 * {@link #OTHER} (counted in {@link #overflowed()}), so a scrape stays the same size whatever the
 * workload.
 *
 * <p>Design note: byte-seconds are kept in byte-milliseconds (a long adder) rather than doubles,
 * so concurrent additions are exact; 512 MiB held for a year still fits.
 */
public final class PrepareAccounting {

    /** Namespaces with a row of their own. */
    public static final int MAX_ROWS = 256;
    /** The row of namespaces beyond {@link #MAX_ROWS}. */
    public static final int OTHER = -1;

    /** Why held pages were let go. */
    public enum Release { CONSUMED, UNUSED, EXPIRED }

    /** One namespace's counts (live adders). */
    public static final class Row {
        final int namespaceId;
        final LongAdder preparedSsd = new LongAdder();
        final LongAdder preparedPeer = new LongAdder();
        final LongAdder consumed = new LongAdder();
        final LongAdder unused = new LongAdder();
        final LongAdder expired = new LongAdder();
        final LongAdder byteMillis = new LongAdder();
        final LongAdder trimmed = new LongAdder();
        final LongAdder refused = new LongAdder();

        Row(int namespaceId) {
            this.namespaceId = namespaceId;
        }

        /** A snapshot of this row. */
        public Counts counts() {
            return new Counts(namespaceId, preparedSsd.sum(), preparedPeer.sum(), consumed.sum(), unused.sum(),
                    expired.sum(), byteMillis.sum() / 1000.0, trimmed.sum(), refused.sum());
        }
    }

    /** A row's values: pages by outcome, byte-seconds held, prepares trimmed and refused. */
    public record Counts(int namespaceId, long preparedSsd, long preparedPeer, long consumed, long releasedUnused,
                         long expired, double byteSecondsHeld, long trimmed, long refused) {
    }

    private final Map<Integer, Row> rows = new ConcurrentHashMap<>();
    private final LongAdder overflowed = new LongAdder();
    private volatile Consumer<Row> onNewRow = r -> { };

    public PrepareAccounting() {
        // rows are created on first use
    }

    /** Who learns of each new row (the Manager's meters register its series); set once at wiring. */
    public void onNewRow(Consumer<Row> listener) {
        this.onNewRow = listener;
    }

    /** Counts a page staged and held, by its route (a peer or this Manager's SSD). */
    void prepared(int namespaceId, boolean peer) {
        Row r = row(namespaceId);
        (peer ? r.preparedPeer : r.preparedSsd).increment();
    }

    /** Counts a held page let go after {@code heldNanos} holding {@code bytes}. */
    void released(int namespaceId, Release why, long bytes, long heldNanos) {
        Row r = row(namespaceId);
        switch (why) {
            case CONSUMED -> r.consumed.increment();
            case UNUSED -> r.unused.increment();
            case EXPIRED -> r.expired.increment();
        }
        r.byteMillis.add(bytes * Math.max(0, heldNanos / 1_000_000));
    }

    void trimmed(int namespaceId) {
        row(namespaceId).trimmed.increment();
    }

    void refused(int namespaceId) {
        row(namespaceId).refused.increment();
    }

    /** Every row, for /status. */
    public List<Counts> snapshot() {
        List<Counts> out = new ArrayList<>(rows.size());
        for (Row r : rows.values()) out.add(r.counts());
        out.sort((a, b) -> Integer.compare(a.namespaceId(), b.namespaceId()));
        return out;
    }

    /** Counts that went to the {@link #OTHER} row because the table was full. */
    public long overflowed() {
        return overflowed.sum();
    }

    private Row row(int namespaceId) {
        Row r = rows.get(namespaceId);
        if (r != null) return r;
        int id = namespaceId;
        if (rows.size() >= MAX_ROWS) {
            overflowed.increment();
            id = OTHER;
        }
        boolean[] created = {false};
        r = rows.computeIfAbsent(id, k -> {
            created[0] = true;
            return new Row(k);
        });
        if (created[0]) onNewRow.accept(r);
        return r;
    }

    /** Accessors for meters (a row's live totals). */
    public static long preparedSsd(Row r) {
        return r.preparedSsd.sum();
    }

    public static long preparedPeer(Row r) {
        return r.preparedPeer.sum();
    }

    public static long consumed(Row r) {
        return r.consumed.sum();
    }

    public static long unused(Row r) {
        return r.unused.sum();
    }

    public static long expired(Row r) {
        return r.expired.sum();
    }

    public static double byteSeconds(Row r) {
        return r.byteMillis.sum() / 1000.0;
    }

    public static int namespaceId(Row r) {
        return r.namespaceId;
    }
}
