package io.orbitkv.server.membership;

import io.orbitkv.core.catalog.Member;
import java.nio.charset.StandardCharsets;
import java.util.Optional;

/**
 * The etcd key layout of cluster membership, and the value format of a member record.
 *
 * <pre>
 *   /orbitkv/&lt;cluster&gt;/members/&lt;nodeId&gt;      = "&lt;incarnation&gt; &lt;host:port&gt;"   (under the node's lease)
 *   /orbitkv/&lt;cluster&gt;/incarnations/&lt;nodeId&gt; = "&lt;incarnation, 19 digits zero-padded&gt;"  (no lease)
 * </pre>
 *
 * The incarnation key survives the lease and is zero-padded so that etcd's byte-wise value
 * comparison is numeric order: a registration transaction refuses an incarnation lower than the
 * stored one. Stateless.
 */
final class MembershipRecord {

    private MembershipRecord() {
    }

    static String membersPrefix(String clusterId) {
        return "/orbitkv/" + clusterId + "/members/";
    }

    static String memberKey(String clusterId, String nodeId) {
        return membersPrefix(clusterId) + nodeId;
    }

    static String incarnationKey(String clusterId, String nodeId) {
        return "/orbitkv/" + clusterId + "/incarnations/" + nodeId;
    }

    static String padded(long incarnation) {
        return String.format("%019d", incarnation);
    }

    static String value(Member m) {
        return m.incarnation() + " " + m.endpoint();
    }

    /** Parses a member record; empty for a malformed one (an expected outcome: the caller leaves it out of the view). */
    static Optional<Member> parse(String clusterId, String key, byte[] value) {
        String prefix = membersPrefix(clusterId);
        if (!key.startsWith(prefix)) return Optional.empty();
        String text = new String(value, StandardCharsets.UTF_8);
        int space = text.indexOf(' ');
        if (space <= 0) return Optional.empty();
        try {
            return Optional.of(new Member(key.substring(prefix.length()), text.substring(space + 1),
                    Long.parseLong(text.substring(0, space))));
        } catch (IllegalArgumentException e) {
            return Optional.empty();
        }
    }
}
