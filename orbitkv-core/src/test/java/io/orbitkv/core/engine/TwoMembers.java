package io.orbitkv.core.engine;

import io.orbitkv.core.peer.MemberView;
import io.orbitkv.core.peer.NodeIncarnation;

import java.util.Optional;
import java.util.function.BooleanSupplier;

/**
 * The member view of the two-Manager tests in one JVM: nodes {@code a} and {@code b}, both at
 * incarnation 1, live; remote work allowed while {@code remoteWork} says so.
 */
record TwoMembers(BooleanSupplier remoteWork) implements MemberView {

    static final NodeIncarnation A = new NodeIncarnation("a", 1);
    static final NodeIncarnation B = new NodeIncarnation("b", 1);

    /** Always valid for remote work. */
    static TwoMembers alwaysValid() {
        return new TwoMembers(() -> true);
    }

    @Override
    public boolean validForRemoteWork() {
        return remoteWork.getAsBoolean();
    }

    @Override
    public Optional<NodeIncarnation> live(String nodeId) {
        return Optional.ofNullable(switch (nodeId) {
            case "a" -> A;
            case "b" -> B;
            default -> null;
        });
    }
}
