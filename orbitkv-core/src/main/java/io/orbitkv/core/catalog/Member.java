package io.orbitkv.core.catalog;

import java.util.Objects;
import java.util.regex.Pattern;

/**
 * One live Manager as membership evidence names it: its node id, the endpoint of its cluster RPC
 * server, and the incarnation (persistent epoch) of the process that registered.
 *
 * @param nodeId      stable name of the node, {@code [A-Za-z0-9_.-]{1,64}}
 * @param endpoint    {@code host:port} of the node's cluster gRPC server
 * @param incarnation strictly increases at each start of that node (never reused), ≥ 1
 */
public record Member(String nodeId, String endpoint, long incarnation) implements Comparable<Member> {

    private static final Pattern NODE_ID = Pattern.compile("[A-Za-z0-9_.-]{1,64}");

    public Member {
        Objects.requireNonNull(nodeId, "nodeId");
        if (!NODE_ID.matcher(nodeId).matches()) {
            throw new IllegalArgumentException("node id must match " + NODE_ID.pattern() + ": '" + nodeId + "'");
        }
        Objects.requireNonNull(endpoint, "endpoint");
        if (incarnation < 1) throw new IllegalArgumentException("incarnation must be >= 1: " + incarnation);
    }

    /** Validates a node id without building a member. */
    public static String requireNodeId(String nodeId) {
        new Member(nodeId, "-", 1);
        return nodeId;
    }

    @Override
    public int compareTo(Member o) {
        int c = nodeId.compareTo(o.nodeId);
        return c != 0 ? c : Long.compare(incarnation, o.incarnation);
    }
}
