package io.orbitkv.state.protocol;

import java.util.List;

/**
 * The engine channel's budgets. The first group is enforced by {@link FrameDecoder} on every
 * frame (an excess is {@link ErrorCode#TOO_LARGE}); the second by the Manager's tables (a full
 * table is {@link ErrorCode#BUSY}). The Manager sends its values in REGISTERED, in component
 * order, as {@value #FIELDS} u32.
 *
 * <p>Value; immutable. Invariants: every budget is {@code >= 1}, and
 * {@code FrameLayout.HEADER_BYTES <= maxFrameBytes <= }{@value #MAX_FRAME_BYTES_CEILING}.
 *
 * <p>Design note on the defaults: a QUERY of {@code maxPagesPerQuery} 32-byte keys is 2 MiB, and
 * its QUERY_RESULT with every page RESIDENT (17 bytes a page) 1.1 MiB, so
 * {@code maxFrameBytes} = 4 MiB admits the largest legal frame of each type with headroom while
 * bounding a connection's receive buffer; 65,536 pages cover a 1M-token prompt at 16 tokens a page.
 *
 * @param maxFrameBytes                largest frame, header included, in bytes (decoder)
 * @param maxGroupsPerQuery            groups in one QUERY or QUERY_RESULT (decoder)
 * @param maxPagesPerQuery             pages summed over a QUERY's or QUERY_RESULT's groups (decoder)
 * @param maxPagesPerPublish           pages in one PUBLISH_RESERVE or RESERVED (decoder)
 * @param maxIdsPerSettle              reservation ids in one PUBLISH_COMMIT/ABORT or its reply (decoder)
 * @param maxPagesPerRestore           pages in one RESTORE (decoder)
 * @param maxArenaFiles                arena files in one REGISTERED (decoder)
 * @param maxStatsCounters             counters in one STATS_REPLY (decoder)
 * @param maxStringBytes               UTF-8 bytes of a path or an error message (decoder)
 * @param maxConnections               client connections the Manager holds at once (Manager)
 * @param maxOperationsPerConnection   live operations (queries, restores) of one connection (Manager)
 * @param maxReservationsPerConnection live publish reservations of one connection (Manager)
 * @param maxRegionsPerConnection      destination regions of one connection (Manager)
 */
public record ProtocolLimits(
        int maxFrameBytes,
        int maxGroupsPerQuery,
        int maxPagesPerQuery,
        int maxPagesPerPublish,
        int maxIdsPerSettle,
        int maxPagesPerRestore,
        int maxArenaFiles,
        int maxStatsCounters,
        int maxStringBytes,
        int maxConnections,
        int maxOperationsPerConnection,
        int maxReservationsPerConnection,
        int maxRegionsPerConnection) {

    /** Number of u32 fields of the wire form. */
    public static final int FIELDS = 13;
    /** Size of the wire form, in bytes. */
    public static final int ENCODED_BYTES = FIELDS * 4;
    /** No configuration may raise {@code maxFrameBytes} above 64 MiB. */
    public static final int MAX_FRAME_BYTES_CEILING = 64 << 20;

    /** The defaults of {@code docs/protocol.md}. */
    public static final ProtocolLimits DEFAULTS = new ProtocolLimits(
            4 << 20, 64, 65_536, 4_096, 4_096, 65_536, 256, 256, 4_096,
            256, 1_024, 16_384, 64);

    public ProtocolLimits {
        if (maxFrameBytes < FrameLayout.HEADER_BYTES || maxFrameBytes > MAX_FRAME_BYTES_CEILING) {
            throw new IllegalArgumentException("maxFrameBytes must be in [" + FrameLayout.HEADER_BYTES + ", "
                    + MAX_FRAME_BYTES_CEILING + "]: " + maxFrameBytes);
        }
        List<Integer> budgets = List.of(maxGroupsPerQuery, maxPagesPerQuery, maxPagesPerPublish, maxIdsPerSettle,
                maxPagesPerRestore, maxArenaFiles, maxStatsCounters, maxStringBytes, maxConnections,
                maxOperationsPerConnection, maxReservationsPerConnection, maxRegionsPerConnection);
        for (int b : budgets) {
            if (b < 1) throw new IllegalArgumentException("every budget must be >= 1: " + budgets);
        }
        if (maxStringBytes > 0xFFFF) {
            throw new IllegalArgumentException("maxStringBytes must fit a u16 length: " + maxStringBytes);
        }
        if (maxGroupsPerQuery > 0xFFFF || maxArenaFiles > 0xFFFF || maxStatsCounters > 0xFFFF) {
            throw new IllegalArgumentException("group, arena and counter budgets must fit a u16 count");
        }
    }

    /** These limits with the largest frame {@code bytes} long. */
    public ProtocolLimits withMaxFrameBytes(int bytes) {
        int[] v = toArray();
        v[0] = bytes;
        return fromArray(v);
    }

    /** These limits with the Manager's per-connection table budgets (the last four components). */
    public ProtocolLimits withConnectionBudgets(int connections, int operationsPerConnection, int reservationsPerConnection,
                                                int regionsPerConnection) {
        int[] v = toArray();
        v[9] = connections;
        v[10] = operationsPerConnection;
        v[11] = reservationsPerConnection;
        v[12] = regionsPerConnection;
        return fromArray(v);
    }

    /** The values in wire (component) order. */
    int[] toArray() {
        return new int[] {maxFrameBytes, maxGroupsPerQuery, maxPagesPerQuery, maxPagesPerPublish, maxIdsPerSettle,
            maxPagesPerRestore, maxArenaFiles, maxStatsCounters, maxStringBytes, maxConnections,
            maxOperationsPerConnection, maxReservationsPerConnection, maxRegionsPerConnection};
    }

    /** Builds limits from values in wire order; throws IllegalArgumentException if they break an invariant. */
    static ProtocolLimits fromArray(int[] v) {
        if (v.length != FIELDS) throw new IllegalArgumentException("need " + FIELDS + " values: " + v.length);
        return new ProtocolLimits(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12]);
    }
}
