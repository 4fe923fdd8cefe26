package io.orbitkv.core.catalog;

import java.util.Objects;

/**
 * One live Manager as membership evidence names it: its node id, the endpoint of its cluster RPC
 * server, and the incarnation (persistent epoch) of the process that registered.
 *
 * @param nodeId      stable name of the node, {@code [A-Za-z0-9_.-]{1,64}}
 * @param endpoint    {@code host:port} of the node's cluster gRPC server
 * @param incarnation strictly increases at each start of that node (never reused), ≥ 1
 */
public record Member(String nodeId, String endpoint, long incarnation) implements Comparable<Member> {

    /** What a node id must match; {@link #isNodeId} checks it without a regex. */
    private static final String NODE_ID = "[A-Za-z0-9_.-]{1,64}";

    public Member {
        requireNodeId(nodeId);
        Objects.requireNonNull(endpoint, "endpoint");
        if (incarnation < 1) throw new IllegalArgumentException("incarnation must be >= 1: " + incarnation);
    }

    /**
     * Whether {@code s} matches {@link #NODE_ID}, checked by hand: every catalog answer builds a
     * {@link Holder} per key, and a regex matcher per key was 3 % of a catalog lookup's CPU.
     */
    private static boolean isNodeId(String s) {
        int n = s.length();
        if (n < 1 || n > 64) return false;
        for (int i = 0; i < n; i++) {
            char c = s.charAt(i);
            boolean ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
                    || c == '_' || c == '.' || c == '-';
            if (!ok) return false;
        }
        return true;
    }

    /** Validates a node id without building a member. */
    public static String requireNodeId(String nodeId) {
        Objects.requireNonNull(nodeId, "nodeId");
        if (!isNodeId(nodeId)) {
            throw new IllegalArgumentException("node id must match " + NODE_ID + ": '" + nodeId + "'");
        }
        return nodeId;
    }

    @Override
    public int compareTo(Member o) {
        int c = nodeId.compareTo(o.nodeId);
        return c != 0 ? c : Long.compare(incarnation, o.incarnation);
    }
}
