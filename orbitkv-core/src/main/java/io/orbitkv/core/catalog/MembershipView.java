package io.orbitkv.core.catalog;

import java.util.List;
import java.util.Objects;

/**
 * What this Manager may currently believe about the cluster: the live members and whether that
 * belief is valid evidence. Remote work (catalog lookups, peer reads, residency streaming) starts
 * only from a valid view; an invalid view means "membership unknown", and callers fall back to
 * local work.
 *
 * <p>Immutable snapshot, published by the membership owner (in the server, the etcd membership)
 * and read by any thread.
 *
 * @param valid         false when this node's own registration is not known to hold (lease lost,
 *                      store unreachable beyond the timeout) or the watch is broken and not yet
 *                      repaired
 * @param live          members sorted by node id, this node included once registered
 * @param revision      the store revision this view was read at (0 before the first read)
 * @param invalidReason why the view is invalid; empty when valid
 * @param registrations how many times this process registered itself so far (each lease grant
 *                      with its member record, the first included; 0 before any). A change means
 *                      this node's record was re-created (its lease expired while it lived, e.g.
 *                      paused past the TTL), so shard owners may have dropped what it streamed,
 *                      even though the live set, and so {@link #digest()}, look the same again
 */
public record MembershipView(boolean valid, List<Member> live, long revision, String invalidReason, long registrations) {

    public MembershipView {
        live = live.stream().sorted().toList();
        Objects.requireNonNull(invalidReason, "invalidReason");
        if (valid && !invalidReason.isEmpty()) throw new IllegalArgumentException("a valid view has no invalid reason");
        if (!valid && invalidReason.isEmpty()) throw new IllegalArgumentException("an invalid view needs a reason");
        if (registrations < 0) throw new IllegalArgumentException("registrations: " + registrations);
    }

    /** A view whose owner does not count its registrations (0). */
    public MembershipView(boolean valid, List<Member> live, long revision, String invalidReason) {
        this(valid, live, revision, invalidReason, 0);
    }

    /** The view before any membership evidence was read. */
    public static MembershipView initial() {
        return new MembershipView(false, List.of(), 0, "membership not read yet");
    }

    public static MembershipView valid(List<Member> live, long revision) {
        return new MembershipView(true, live, revision, "");
    }

    /** A valid view published after this process's {@code registrations}-th registration. */
    public static MembershipView valid(List<Member> live, long revision, long registrations) {
        return new MembershipView(true, live, revision, "", registrations);
    }

    /** This view's members, but no longer valid evidence. */
    public MembershipView invalidate(String reason) {
        return new MembershipView(false, live, revision, reason, registrations);
    }

    /**
     * A digest of the live set (node ids and incarnations): two views with the same members have
     * the same digest, whatever their revisions. Shard owners compare it to decide whether a
     * source's stream and a requester's lookup were sharded over the same members.
     */
    public long digest() {
        return digest(live);
    }

    /** {@link #digest()} of any member list (order does not matter). */
    public static long digest(List<Member> members) {
        long h = 0x9E3779B97F4A7C15L;
        for (Member m : members.stream().sorted().toList()) {
            h = Rendezvous.mix(h ^ Rendezvous.nodeHash(m.nodeId()));
            h = Rendezvous.mix(h ^ m.incarnation());
        }
        return h;
    }
}
