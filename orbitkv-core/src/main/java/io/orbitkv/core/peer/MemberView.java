package io.orbitkv.core.peer;

import java.util.Optional;

/**
 * What the peer layer needs from membership: whether the view is valid for new remote work, and
 * which incarnation of a node is live. Implemented by the cluster membership (etcd watch); tests
 * use a fixed map.
 */
public interface MemberView {

    /** True while membership evidence and this Manager's own registration are valid. */
    boolean validForRemoteWork();

    /** The incarnation registered now for {@code nodeId}, or empty if it is not a member. */
    Optional<NodeIncarnation> live(String nodeId);
}
