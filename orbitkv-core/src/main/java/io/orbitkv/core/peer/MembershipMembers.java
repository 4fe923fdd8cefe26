package io.orbitkv.core.peer;

import io.orbitkv.core.catalog.Member;
import io.orbitkv.core.catalog.MembershipView;

import java.util.Objects;
import java.util.Optional;
import java.util.function.Supplier;

/**
 * The peer layer's {@link MemberView} over the cluster's {@link MembershipView} (the etcd watch).
 *
 * <p>Borrows the view supplier; owns nothing. Thread model: thread-safe, never blocks (the
 * supplier returns the last view the watch built). Invariant: remote work is allowed only while
 * the view is valid <em>and</em> lists this Manager at its own incarnation, so a Manager whose
 * registration lapsed (lease lost, a newer incarnation registered) neither serves nor requests.
 *
 * <p>Design note: a linear scan of the live list per call; clusters here are a handful of
 * members (3 in the tests, tens at most), cheaper than keeping a map in step with the watch.
 */
public final class MembershipMembers implements MemberView {

    private final Supplier<MembershipView> view;
    private final NodeIncarnation self;

    public MembershipMembers(Supplier<MembershipView> view, NodeIncarnation self) {
        this.view = Objects.requireNonNull(view, "view");
        this.self = Objects.requireNonNull(self, "self");
    }

    @Override
    public boolean validForRemoteWork() {
        MembershipView v = view.get();
        return v.valid() && v.live().stream()
                .anyMatch(m -> m.nodeId().equals(self.nodeId()) && m.incarnation() == self.incarnation());
    }

    @Override
    public Optional<NodeIncarnation> live(String nodeId) {
        return member(view.get(), nodeId).map(m -> new NodeIncarnation(m.nodeId(), m.incarnation()));
    }

    /** {@code nodeId}'s entry in {@code v}, when it is a member (valid or not: the last known list). */
    static Optional<Member> member(MembershipView v, String nodeId) {
        return v.live().stream().filter(m -> m.nodeId().equals(nodeId)).findFirst();
    }
}
